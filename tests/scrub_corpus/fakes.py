"""Fake credentials and PII, built from a seeded RNG in each documented format.

Nothing here is a real credential, and no token literal sits in the repository:
every value is generated. ``FAKES[name](rng)`` returns ``(snippet, secret)``:
the text to plant (the token, or the context that makes it a secret, such as
``password=...``) and the part that must disappear once scrubbed.
``NEAR_MISSES[name]`` lists look-alikes the rule must leave alone.
"""

from __future__ import annotations

import base64
import json
import re
import string
from collections.abc import Callable
from random import Random
from urllib.parse import quote

B62 = string.ascii_letters + string.digits
B64URL = B62 + "-_"
HEX = "0123456789abcdef"

Fake = tuple[str, str]


def pick(rng: Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def b62(rng: Random, n: int) -> str:
    """Random base62 with every class present, as generated keys have."""
    while True:
        value = pick(rng, B62, n)
        if (
            any(c.isupper() for c in value)
            and any(c.islower() for c in value)
            and any(c.isdigit() for c in value)
        ):
            return value


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def bare(make: Callable[[Random], str]) -> Callable[[Random], Fake]:
    def fake(rng: Random) -> Fake:
        token = make(rng)
        return token, token

    return fake


def private_key(rng: Random) -> Fake:
    kind = rng.choice(["RSA ", "EC ", "OPENSSH ", "ENCRYPTED ", "", "DSA "])
    body = base64.b64encode(rng.randbytes(rng.randrange(120, 1200))).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    newline = rng.choice(["\n", "\\n", "\r\n"])
    block = newline.join([f"-----BEGIN {kind}PRIVATE KEY-----", *lines, f"-----END {kind}PRIVATE KEY-----"])
    return block, lines[0]


def jwt(rng: Random) -> Fake:
    fields = {"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
    # Compact JSON (eyJ…) as most libraries write it, or with spaces or indented (eyAi…, ewog…, ew0K…).
    layout = rng.choice([{"separators": (",", ":")}, {}, {"indent": 2}, {"indent": "\t"}, {"indent": 2}])
    text = json.dumps(fields, **layout)  # type: ignore[arg-type]
    if layout.get("indent") == 2 and rng.random() < 0.5:
        text = text.replace("\n", "\r\n")
    elif not layout and rng.random() < 0.5:
        text = "{ " + text[1:]
    header = b64url(text.encode())
    claims = {
        "sub": str(rng.randrange(10**9)),
        "iat": rng.randrange(1_600_000_000, 1_800_000_000),
        "scope": "read",
    }
    token = f"{header}.{b64url(json.dumps(claims).encode())}.{b64url(rng.randbytes(32))}"
    return token, token


def aws_key_id(rng: Random) -> str:
    return rng.choice(["AKIA", "ASIA"]) + pick(rng, string.ascii_uppercase + "234567", 16)


def aws_csv(rng: Random, password: str, secret: str) -> str:
    """A credentials file as the AWS console downloads it: the 5-column or the 2-column layout."""
    key_id = aws_key_id(rng)
    if not password:
        return f"Access key ID,Secret access key\r\n{key_id},{secret}\r\n"
    link = f"https://{rng.randrange(10**11, 10**12)}.signin.aws.amazon.com/console"
    head = "User name,Password,Access key ID,Secret access key,Console login link"
    return f"{head}\n{rng.choice(['alice', 'svc-deploy', 'Bob Smith'])},{password},{key_id},{secret},{link}\n"


def console_password(rng: Random) -> str:
    return b62(rng, rng.randrange(8, 20)) + rng.choice(["", "!", "#$", "%&*", "()"])


def aws_console_password(rng: Random) -> Fake:
    password = console_password(rng)
    return aws_csv(rng, password, pick(rng, B62 + "/+", 40)), password


def aws_secret(rng: Random) -> Fake:
    secret = pick(rng, B62 + "/+", 40)
    if rng.random() < 0.25:
        return aws_csv(rng, rng.choice(["", console_password(rng)]), secret), secret
    form = rng.choice(
        [
            "aws_secret_access_key = {}",
            "AWS_SECRET_ACCESS_KEY={}",
            '"SecretAccessKey": "{}"',
            "secretAccessKey: '{}'",
        ]
    )
    return form.format(secret), secret


def gitlab(rng: Random) -> Fake:
    prefix = rng.choice(
        ["glpat-", "glpat-", "gldt-", "glrt-", "gloas-", "glcbt-", "glptt-", "glft-", "glimt-"]
    )
    token = prefix + b62(rng, 20)
    return token, token


def slack(rng: Random) -> Fake:
    digits = "0123456789"
    token = rng.choice(
        [
            f"xoxb-{pick(rng, digits, 12)}-{pick(rng, digits, 13)}-{b62(rng, 24)}",
            f"xoxp-{pick(rng, digits, 12)}-{pick(rng, digits, 12)}-{pick(rng, digits, 13)}-"
            + pick(rng, HEX, 32),
            f"xapp-1-A{pick(rng, string.ascii_uppercase + digits, 10)}-{pick(rng, digits, 13)}-"
            + pick(rng, HEX, 64),
        ]
    )
    return token, token


def slack_webhook(rng: Random) -> Fake:
    upper = string.ascii_uppercase + string.digits
    secret = b62(rng, 24)
    return f"https://hooks.slack.com/services/T{pick(rng, upper, 8)}/B{pick(rng, upper, 10)}/{secret}", secret


def twilio_auth(rng: Random) -> Fake:
    token = pick(rng, HEX, 32)
    if rng.random() < 0.5:
        return f"AC{pick(rng, HEX, 32)}:{token}", token
    return f"{rng.choice(['TWILIO_AUTH_TOKEN=', 'twilio_auth_token: ', 'TwilioApiSecret = '])}{token}", token


def url_password(rng: Random) -> Fake:
    password = b62(rng, rng.randrange(10, 24)) + rng.choice(["", "!", "%21", "~"])
    scheme = rng.choice(["postgresql", "mysql", "redis", "amqp", "https", "mongodb+srv"])
    url = f"{scheme}://svc_app:{password}@db-{rng.randrange(9)}.internal:5432/app"
    form = rng.choice(["plain", "plain", "encoded", "encoded-lower", "escaped", "escaped-twice"])
    if form.startswith("encoded"):  # the URL as a query parameter: ?next=postgresql%3A%2F%2F…
        url, password = quote(url, safe=""), quote(password, safe="")
        if form == "encoded-lower":
            url, password = lower_hex(url), lower_hex(password)
        return f"https://app.internal/login?next={url}&x=1", password
    if form == "escaped":  # a serializer that escapes "/" (PHP, some Java and JS ones)
        return url.replace("/", "\\/"), password
    if form == "escaped-twice":  # that JSON inside JSON again
        return json.dumps(url.replace("/", "\\/"))[1:-1], password
    return url, password


def lower_hex(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), text)


def authorization(rng: Random) -> Fake:
    if rng.random() < 0.4:
        token = base64.b64encode(f"svc-{rng.randrange(99)}:{b62(rng, 14)}".encode()).decode()
        scheme = "Basic"
    else:
        token, scheme = b62(rng, rng.randrange(24, 64)), rng.choice(["Bearer", "bearer", "Token"])
    form = rng.choice(["Authorization: {s} {t}", '"authorization": "{s} {t}"', "-H 'Authorization: {s} {t}'"])
    return form.format(s=scheme, t=token), token


def bearer(rng: Random) -> Fake:
    token = b62(rng, rng.randrange(24, 48)) + rng.choice(["", ".", "-", "_"]) + b62(rng, 12)
    return f"Bearer {token}", token


def assignment(rng: Random) -> Fake:
    # Mostly short, sometimes long (a service-account blob, a session cookie): judged and redacted whole.
    value = b62(rng, rng.randrange(12, 40)) if rng.random() < 0.85 else long_value(rng)
    key = rng.choice(
        [
            "password",
            "DB_PASSWORD",
            "client_secret",
            "api_key",
            "apiKey",
            "access_token",
            "SECRET_KEY",
            "passwd",
            "auth_token",
            "X-Api-Key",
            "refresh_token",
            "private_key",
            "PGPASSWORD",
        ]
    )
    form = rng.choice(
        ["{k}={v}", "{k}: {v}", '"{k}": "{v}"', "{k} = '{v}'", '\\"{k}\\": \\"{v}\\"', '{k}: str = "{v}"']
    )
    return form.format(k=key, v=value), value


def long_value(rng: Random) -> str:
    """A generated value longer than 256 characters: base62 or base64 (with + / and = padding)."""
    if rng.random() < 0.5:
        return b62(rng, rng.randrange(257, 3000))
    return base64.b64encode(rng.randbytes(rng.randrange(200, 2400))).decode()


def phone(rng: Random) -> Fake:
    area, exchange, line = rng.randrange(201, 990), rng.randrange(200, 999), rng.randrange(10000)
    number = rng.choice(
        [
            f"+1 {area} {exchange} {line:04}",
            f"({area}) {exchange}-{line:04}",
            f"{area}-{exchange}-{line:04}",
            f"+44 20 {rng.randrange(7000, 7999)} {line:04}",
            "+33 6 " + " ".join(str(rng.randrange(10, 99)) for _ in range(4)),
            f"+4915{rng.randrange(10**8, 10**9)}",
            f"020 {rng.randrange(7000, 7999)} {line:04}",
        ]
    )
    return number, number


def luhn_complete(prefix: str, length: int, rng: Random) -> str:
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return body + str((10 - total % 10) % 10)


def card(rng: Random) -> Fake:
    prefix, length = rng.choice(
        [("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("34", 15), ("37", 15), ("6011", 16)]
    )
    digits = luhn_complete(prefix, length, rng)
    sep = rng.choice(["", " ", "-"])
    groups = (
        [digits[:4], digits[4:10], digits[10:]]
        if length == 15
        else [digits[i : i + 4] for i in range(0, 16, 4)]
    )
    number = sep.join(groups)
    return number, number


def iban(rng: Random) -> Fake:
    country, bban = rng.choice(
        [
            ("DE", pick(rng, string.digits, 18)),
            ("GB", pick(rng, string.ascii_uppercase, 4) + pick(rng, string.digits, 14)),
            ("FR", pick(rng, string.digits, 23)),
            ("NL", pick(rng, string.ascii_uppercase, 4) + pick(rng, string.digits, 10)),
            ("ES", pick(rng, string.digits, 20)),
        ]
    )
    check = 98 - int("".join(str(int(c, 36)) for c in bban + country + "00")) % 97
    compact = f"{country}{check:02}{bban}"
    number = (
        " ".join(compact[i : i + 4] for i in range(0, len(compact), 4)) if rng.random() < 0.5 else compact
    )
    return number, number


def ssn(rng: Random) -> Fake:
    area = rng.choice([a for a in range(1, 900) if a != 666])
    number = f"{area:03}-{rng.randrange(1, 100):02}-{rng.randrange(1, 10000):04}"
    return number, number


FAKES: dict[str, Callable[[Random], Fake]] = {
    "private-key": private_key,
    "jwt": jwt,
    "aws-access-key-id": bare(aws_key_id),
    "aws-secret-access-key": aws_secret,
    "aws-console-password": aws_console_password,
    "github-token": bare(lambda r: f"gh{r.choice('pousr')}_{b62(r, 36)}"),
    "github-fine-grained-token": bare(lambda r: f"github_pat_{b62(r, 22)}_{b62(r, 59)}"),
    "gitlab-token": gitlab,
    "anthropic-api-key": bare(lambda r: f"sk-ant-{r.choice(['api03', 'admin01'])}-{pick(r, B64URL, 93)}AA"),
    "openai-api-key": bare(
        lambda r: (
            r.choice(["sk-", "sk-proj-", "sk-svcacct-", "sk-admin-"]) + b62(r, 20) + "T3BlbkFJ" + b62(r, 20)
        )
    ),
    "google-api-key": bare(lambda r: "AIza" + pick(r, B64URL, 35)),
    "slack-token": slack,
    "slack-webhook": slack_webhook,
    "stripe-key": bare(lambda r: r.choice(["sk_live_", "rk_live_", "sk_test_"]) + b62(r, r.choice([24, 99]))),
    "twilio-api-key": bare(lambda r: "SK" + pick(r, HEX, 32)),
    "twilio-auth-token": twilio_auth,
    "sendgrid-api-key": bare(lambda r: f"SG.{pick(r, B64URL, 22)}.{pick(r, B64URL, 43)}"),
    "npm-token": bare(lambda r: "npm_" + b62(r, 36)),
    "pypi-token": bare(lambda r: "pypi-AgEIcHlwaS5vcmc" + pick(r, B64URL, 150)),
    "huggingface-token": bare(lambda r: "hf_" + b62(r, 34)),
    "url-password": url_password,
    "authorization-header": authorization,
    "bearer-token": bearer,
    "credential-assignment": assignment,
    "email": bare(
        lambda r: (
            f"{pick(r, string.ascii_lowercase, 6)}.{pick(r, 'xyzab', 5)}@mail-{r.randrange(99)}.example.org"
        )
    ),
    "phone": phone,
    "card": card,
    "iban": iban,
    "ssn": ssn,
}


def near_misses(rng: Random) -> dict[str, list[str]]:
    """For each rule, look-alikes it must not match: wrong length, charset, placeholders, hashes, ids."""
    sha, uuid_ = pick(rng, HEX, 40), "550e8400-e29b-41d4-a716-446655440000"
    no_alg = b64url(b'{"typ":"JWT"}')
    return {
        "private-key": [
            "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n"
            "-----END PUBLIC KEY-----",
            "-----BEGIN CERTIFICATE-----\n"
            + base64.b64encode(rng.randbytes(90)).decode()
            + "\n-----END CERTIFICATE-----",
            "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
        ],
        "jwt": [
            f"{no_alg}.{b64url(b'{}')}.{b64url(rng.randbytes(32))}",
            "eyJhbGciOiJIUzI1NiJ9",
            "eyJ" + pick(rng, B64URL, 60),
            # whitespace-first headers without "alg", and prefixes in other base64url text
            ".".join(
                [b64url(json.dumps({"typ": "JWT"}, indent=2).encode()), b64url(b"{}"), pick(rng, B64URL, 43)]
            ),
            f"ewog{pick(rng, B64URL, 40)}.{pick(rng, B64URL, 40)}.{pick(rng, B64URL, 40)}",
            "eyAi" + pick(rng, B64URL, 60),
            "Lewontin, Sewol, ew0 and eyA are not tokens",
        ],
        "aws-access-key-id": [
            "AKIA" + pick(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", 15),
            "AKIA" + pick(rng, "abcdefghijklmnop", 16),
            "AKIAIOSFODNN7EXAMPLE",
            "XAKIA" + pick(rng, "ABCDEFGHIJKLMNOP", 16),
        ],
        "aws-secret-access-key": [
            "aws_secret_access_key = " + pick(rng, B62, 39),
            "aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key=" + "A" * 40,
            "Access key ID,Secret access key\n" + aws_key_id(rng) + "," + pick(rng, B62, 39),
            "Access key ID,Secret access key\nAKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "AKIA" + pick(rng, "ABCDEFGHIJKLMNOP", 16) + "," + "x" * 40,
        ],
        "aws-console-password": [
            "User name,Password,Access key ID,Secret access key,Console login link",
            "alice,,AKIA" + pick(rng, "ABCDEFGHIJKLMNOP", 16) + "," + pick(rng, B62, 40) + ",https://x",
            "alice,hunter2,AKIA" + pick(rng, "ABCDEFGHIJKLMNOP", 16) + "," + pick(rng, B62, 39),
            "alice,hunter2,not-a-key-id," + pick(rng, B62, 40),
            "id,name,value\n1,alpha,AKIA-report-2024",
        ],
        "github-token": [
            "ghp_" + b62(rng, 35),
            "ghx_" + b62(rng, 36),
            "ghp_" + "x" * 36,
            "aghp_" + b62(rng, 36),
            f"commit {sha}",
        ],
        "github-fine-grained-token": ["github_pat_" + b62(rng, 30), "github_pat_" + "X" * 82],
        "gitlab-token": [
            "glpat-" + b62(rng, 10),
            "glpat-xxxxxxxxxxxxxxxxxxxx",
            "glpat-${GITLAB_TOKEN}",
            "glpat-your-token-goes-here-now",
        ],
        "anthropic-api-key": ["sk-ant-api03-" + b62(rng, 10), "sk-ant-api03-" + "x" * 93],
        "openai-api-key": [
            "sk-learn-preprocessing-pipeline-v2",
            "sk-" + b62(rng, 10),
            "sk-" + "x" * 48,
            "sk-your-api-key-here",
            "task-" + b62(rng, 40),
            "disk-" + b62(rng, 30),
            "sk-ThisIsMyProjectNameForDemos",
        ],
        "google-api-key": [
            "AIza" + pick(rng, B62, 34),
            "AIza" + pick(rng, B62, 20) + "." + pick(rng, B62, 14),
        ],
        "slack-token": [
            "xoxb-your-token-here",
            "xoxb-XXXXXXXXXXXX-XXXXXXXXXXXXX-XXXXXXXXXXXXXXXXXXXXXXXX",
            "xoxb-123",
        ],
        "slack-webhook": [
            "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "https://hooks.slack.com/services/",
        ],
        "stripe-key": [
            "sk_live_" + b62(rng, 10),
            "pk_live_" + b62(rng, 24),
            "sk_test_" + "x" * 24,
            "sk_live_...",
        ],
        "twilio-api-key": [
            "SK" + pick(rng, HEX, 31),
            "SK" + pick(rng, HEX, 32).upper(),
            "TASK" + pick(rng, HEX, 32),
        ],
        "twilio-auth-token": [
            "TWILIO_AUTH_TOKEN=${TWILIO_AUTH_TOKEN}",
            "TWILIO_AUTH_TOKEN=" + pick(rng, HEX, 31),
            "AC" + pick(rng, HEX, 32) + ":",
        ],
        "sendgrid-api-key": [f"SG.{pick(rng, B64URL, 22)}.{pick(rng, B64URL, 42)}", "SG.example"],
        "npm-token": ["npm_config_cache=/tmp/npm-cache", "npm_" + b62(rng, 35), "npm_package_version=1.2.3"],
        "pypi-token": ["pypi-AgEIcHlwaS5vcmc" + pick(rng, B64URL, 10), "pypi-token"],
        "huggingface-token": [
            "hf_hub_download",
            "hf_" + pick(rng, string.ascii_lowercase, 34),
            "hf_" + b62(rng, 20),
        ],
        "url-password": [
            "postgresql://user:password@localhost/db",
            "redis://:${REDIS_PASSWORD}@cache:6379",
            "https://docs.python.org/3/library/urllib.parse.html",
            "ssh://git@github.com:22/org/repo",
            "http://[::1]:8080/",
            "postgres://app@db/app",
            "https://user:<password>@host",
            "amqp://guest:****@rabbit:5672",
            "mongodb://host1:27017,host2:27017/?replicaSet=rs0",
            "https%3A%2F%2Fexample.com%2Fpath%3Fq%3D1",
            "postgresql%3A%2F%2Fuser%3Apassword%40localhost%2Fdb",
            "redis%3a%2f%2f%3a%24%7BREDIS_PASSWORD%7D%40cache",
            "https:\\/\\/docs.python.org\\/3\\/library\\/",
            "postgres:\\/\\/app@db\\/app",
            "postgresql:\\\\/\\\\/user:password@localhost",
            "C:\\Users\\me:\\/tmp",
        ],
        "authorization-header": [
            "Authorization: Bearer $TOKEN",
            "Authorization: Bearer ${API_TOKEN}",
            'headers = {"Authorization": f"Bearer {token}"}',
            "Authorization: Bearer <token>",
            "authorization: required for all endpoints",
            "Authorization: Basic <credentials>",
        ],
        "bearer-token": [
            "Bearer authentication uses tokens",
            "the bearer of this letter",
            "Bearer {token}",
            "Bearer xxxxxxxxxxxxxxxxxxxxxxxx",
            "Bearer tokens_are_documented_in_rfc6750",
        ],
        "credential-assignment": [
            "password=changeme",
            "token=${TOKEN}",
            "api_key=<your-key>",
            "password=********",
            'secret = os.environ["X"]',
            "max_tokens=4096",
            '"prompt_tokens": 1234',
            '"token_type": "Bearer"',
            '"nextPageToken": "' + b62(rng, 32) + '"',
            "password = user1.password",
            'password = getpass.getpass("Password: ")',
            "secret_name = prod/db/password",
            '"password_min_length": 12',
            "token = tokens[0]",
            f'api_key_id = "{uuid_}"',
            "PASSWORD_FILE=/run/secrets/db",
            '"secret": true',
            "password: str = settings.DB_PASSWORD",
            "tokenizer = AutoTokenizer.from_pretrained('gpt2')",
            'SECRET_KEY = "django-insecure-change-me"',
            f'"sha256": "{pick(rng, HEX, 64)}"',
            "password: hunter22",
            "api_token: my_service_token_2024",
            "access_key: ${{ secrets.ACCESS_KEY }}",
            'token = f"{prefix}{suffix}"',
            '"expires_at": "2024-05-09T07:35:25Z"',
            "token=2024-05-09T07:35:25Z",
            "SECRET_VERSION=1.2.3",
            # long values that are not secrets: words, repetition, a path, code
            "token=" + "_".join(["segment"] * 60),
            "password=" + "a" * 400,
            "secret=/" + "/".join(["dir"] * 100),
            "token=" + "abc" * 120 + "(x)",
            "api_key=" + "password=" * 50,
        ],
        "email": ["@property", "user@localhost", "a @ b", "pkg@1.2.3", "@example.com", "x@y.T"],
        "phone": [
            "2024-01-15",
            "2024-01-15T12:30:45Z",
            "192.168.100.200",
            "12:30:45",
            "ORD-555-234-5678",
            "555-1234",
            uuid_,
            "10.0.0.1:8080",
            "v1.22.333.4444",
            "$1,234,567.89",
            "0.5 0.25 0.125",
            "build 20240115123",
        ],
        "card": [
            "4111 1111 1111 1112",
            "1234 5678 9012 3456",
            "4111-1111 1111-1111",
            "1715240125123",
            "9000000000000000",
            "4111111111111111111111",
            "0000 0000 0000 0000",
        ],
        "iban": [
            "DE89 3704 0044 0532 0130 01",
            "XX89370400440532013000",
            "DE8937040044053201300",
            "ABCD1234EFGH5678IJKL",
        ],
        "ssn": [
            "000-12-3456",
            "666-12-3456",
            "912-34-5678",
            "123-00-4567",
            "123-45-0000",
            "123-45-67890",
            "2024-01-15",
        ],
    }
