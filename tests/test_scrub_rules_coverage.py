"""Wider coverage (issue 13): AWS credential CSVs, long assignment values, JWT headers with whitespace,
passwords in URL-encoded and JSON-escaped URLs, and PEM keys split into a list of lines."""

from __future__ import annotations

import base64
import json
from random import Random
from urllib.parse import quote

import pytest

from safepoint.scrub.pem_lines import PEM_RULE_NAME, pem_line_blocks
from safepoint.scrub.rules import SECRET_RULES, default_scanner
from scrub_corpus.fakes import B62, FAKES, aws_key_id, b62, b64url, pick

SCANNER = default_scanner()


def redact(text: str) -> tuple[str, list[str]]:
    out, names, _ = SCANNER.redact(text)
    return out, names


# -- the AWS console's credentials CSV ---------------------------------------------------------------


def test_console_csv_loses_its_password_and_secret_key_columns() -> None:
    """User name,Password,Access key ID,Secret access key,Console login link: password, key id and
    secret key go; the user name and the console link stay."""
    rng = Random(1)
    password, key_id, secret = "Zq8!" + b62(rng, 12), aws_key_id(rng), pick(rng, B62 + "/+", 40)
    link = "https://123456789012.signin.aws.amazon.com/console"
    head = "User name,Password,Access key ID,Secret access key,Console login link"
    csv = f"{head}\nalice,{password},{key_id},{secret},{link}\n"
    out, names = redact(csv)
    assert out == (
        f"{head}\n"
        f"alice,[REDACTED:aws-console-password],[REDACTED:aws-access-key-id],[REDACTED:aws-secret-access-key],{link}\n"
    )
    assert sorted(names) == ["aws-access-key-id", "aws-console-password", "aws-secret-access-key"]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\\n", "\\r\\n"])
def test_access_key_csv_loses_its_secret_key_column(newline: str) -> None:
    """Access key ID,Secret access key rows (raw or JSON-escaped line breaks): the secret key goes."""
    rng = Random(2)
    rows = [(aws_key_id(rng), pick(rng, B62 + "/+", 40)) for _ in range(3)]
    csv = newline.join(["Access key ID,Secret access key", *(f"{k},{s}" for k, s in rows), ""])
    out, _ = redact(csv)
    assert all(secret not in out for _, secret in rows)
    assert out.count("[REDACTED:aws-secret-access-key]") == 3


@pytest.mark.parametrize(
    "text",
    [
        "User name,Password,Access key ID,Secret access key,Console login link\n",
        "alice,,AKIAABCDEFGHIJKLMNOP," + "x" * 40,  # no password, a typed secret
        "id,value\nAKIAABCDEFGHIJKLMNOP,1\n",
        "report,2024,ASIA-PACIFIC,totals\n",
        "name,password\nalice,hunter2\n",  # no key id: not an AWS credentials file
    ],
)
def test_csv_look_alikes_keep_their_columns(text: str) -> None:
    """A CSV without a real key id and secret key (or with an empty password) keeps its columns."""
    assert [
        f for f in SCANNER.find(text) if f.rule in ("aws-console-password", "aws-secret-access-key")
    ] == []


# -- long assignment values ---------------------------------------------------------------------------


@pytest.mark.parametrize("length", [257, 400, 5_000, 200_000])
@pytest.mark.parametrize(
    "form", ["password={v}\n", '"client_secret": "{v}"', "API_KEY='{v}'", '\\"token\\": \\"{v}\\"']
)
def test_long_values_are_redacted_whole(length: int, form: str) -> None:
    """A value longer than 256 characters (a blob, a session cookie) is still redacted, all of it."""
    value = base64.b64encode(Random(length).randbytes(length)).decode()[:length]
    out, names = redact("config:\n" + form.format(v=value) + "\nend")
    assert names == ["credential-assignment"]
    assert out == "config:\n" + form.format(v="[REDACTED:credential-assignment]") + "\nend"


@pytest.mark.parametrize(
    "text",
    [
        "token=" + "_".join(["segment"] * 80),
        "password=" + "a" * 1000,
        "secret=/" + "/".join(["dir"] * 200),
        "token=" + b62(Random(3), 400) + "(x)",  # code: a call
        "api_key=" + "password=" * 100,
    ],
)
def test_long_look_alikes_stay(text: str) -> None:
    """Long words, repetition, paths and code after a secret key word are not secrets."""
    assert SCANNER.find(text) == []


# -- JWTs whose header JSON has whitespace -----------------------------------------------------------


def jwt_with(header: str) -> str:
    claims = b64url(json.dumps({"sub": "42", "iat": 1_700_000_000}).encode())
    return f"{b64url(header.encode())}.{claims}.{b64url(Random(4).randbytes(32))}"


@pytest.mark.parametrize(
    ("header", "prefix"),
    [
        ('{"alg":"HS256","typ":"JWT"}', "eyJ"),
        ('{"alg": "HS256", "typ": "JWT"}', "eyJ"),
        ('{ "alg": "RS256", "typ": "JWT" }', "eyAi"),
        ('{\n  "alg": "ES256",\n  "typ": "JWT"\n}', "ewog"),
        ('{\r\n  "alg": "HS256"\r\n}', "ew0K"),
        ('{\n"alg": "HS256"}', "ewoi"),
        ('{\t"alg": "HS256"}', "ewki"),
    ],
)
def test_jwts_with_spaced_or_indented_headers(header: str, prefix: str) -> None:
    """JSON headers written with spaces or line breaks (eyAi…, ewog…, ew0K…) are JWTs too."""
    token = jwt_with(header)
    assert token.startswith(prefix)
    out, names = redact(f"Authorization header was {token}, then ok")
    assert (out, names) == ("Authorization header was [REDACTED:jwt], then ok", ["jwt"])


@pytest.mark.parametrize(
    "text",
    [
        jwt_with('{\n  "typ": "JWT"\n}'),  # no "alg"
        "ewog" + pick(Random(5), B62, 30) + "." + pick(Random(6), B62, 30) + "." + pick(Random(7), B62, 30),
        "Lewontin, Sewol, ewok, eyAi and ew0K are words here",
        base64.b64encode(b'{\n  "name": "a config file, not a token"\n}').decode(),
    ],
)
def test_whitespace_jwt_look_alikes_stay(text: str) -> None:
    """Base64 of other JSON, and the prefixes in prose, are not JWTs."""
    assert [f for f in SCANNER.find(text) if f.rule == "jwt"] == []


# -- passwords in URL-encoded and JSON-escaped URLs --------------------------------------------------

PASSWORD = "s3cr" + b62(Random(8), 14) + "!x"


def encoded(url: str, *, lower: bool) -> str:
    text = quote(url, safe="")
    return text.replace("%3A", "%3a").replace("%2F", "%2f").replace("%40", "%40") if lower else text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            f"next={encoded(f'postgres://user:{PASSWORD}@db:5432/app', lower=False)}&a=1",
            quote(PASSWORD, safe=""),
        ),
        (
            f"next={encoded(f'postgres://user:{PASSWORD}@db:5432/app', lower=True)}&a=1",
            quote(PASSWORD, safe=""),
        ),
        (f"postgres%3A%2F%2Fuser%3A{PASSWORD}%40host", PASSWORD),
        (f'{{"url": "postgres:\\/\\/user:{PASSWORD}@host\\/app"}}', PASSWORD),
        (json.dumps({"url": f"postgres:\\/\\/user:{PASSWORD}@host"}), PASSWORD),  # escaped twice
        (json.dumps(json.dumps({"url": f"postgres:\\/\\/user:{PASSWORD}@host"})), PASSWORD),  # and again
        (f"mysql:\\\\\\/\\\\\\/root:{PASSWORD}@db", PASSWORD),
    ],
)
def test_url_passwords_in_encoded_and_escaped_urls(text: str, secret: str) -> None:
    """postgres%3A%2F%2Fuser%3APASSWORD%40host (either hex case) and postgres:\\/\\/user:PASSWORD@host
    (escaped once or twice) lose the password, and only the password."""
    out, names = redact(text)
    assert secret not in out
    assert names == ["url-password"]
    assert "user" in out or "root" in out


@pytest.mark.parametrize(
    "text",
    [
        "next=https%3A%2F%2Fexample.com%2Fpath%3Fq%3D1",
        "postgres%3A%2F%2Fuser%3Apassword%40localhost",  # a placeholder, as in a plain URL
        "redis%3a%2f%2f%3a%24%7BREDIS_PASSWORD%7D%40cache",
        '{"docs": "https:\\/\\/docs.python.org\\/3\\/"}',
        "postgres:\\/\\/app@db\\/app",
        "C:\\Users\\me:\\/tmp and C:\\\\Users",
    ],
)
def test_encoded_and_escaped_urls_without_a_password_stay(text: str) -> None:
    """Encoded or escaped URLs with no password (or a placeholder) are left alone."""
    assert SCANNER.find(text) == []


def test_escaped_url_triggers_pass_the_json_prefilter() -> None:
    """The prefilter runs on a field's JSON text, where a JSON-escaped URL is escaped once more."""
    text = f"postgres:\\\\/\\\\/user:{PASSWORD}@host"
    assert SCANNER.find(text)
    assert SCANNER.might_match(json.dumps({"content": text}))


# -- PEM keys split into a list of lines -------------------------------------------------------------


def pem_lines(seed: int, kind: str = "RSA ", *, end: bool = True, newline: str = "\n") -> list[str]:
    body = base64.b64encode(Random(seed).randbytes(600)).decode()
    lines = [f"-----BEGIN {kind}PRIVATE KEY-----", *(body[i : i + 64] for i in range(0, len(body), 64))]
    if end:
        lines.append(f"-----END {kind}PRIVATE KEY-----")
    return [line + newline for line in lines]


def test_pem_rule_name_is_the_text_rules_name() -> None:
    """pem_line_blocks reports under the same name as the text rule that finds whole blocks."""
    assert PEM_RULE_NAME in [rule.name for rule in SECRET_RULES]
    assert FAKES[PEM_RULE_NAME]


@pytest.mark.parametrize("newline", ["", "\n", "\r\n"])
@pytest.mark.parametrize("kind", ["RSA ", "EC ", "OPENSSH ", "ENCRYPTED ", "", "PGP "])
def test_a_key_split_into_lines_is_one_block(newline: str, kind: str) -> None:
    """A BEGIN line, base64 lines and an END line, one per item, make one block, wherever it sits."""
    lines = pem_lines(1, kind, newline=newline)
    items: list[object] = ["before", 3, *lines, {"x": 1}, "after"]
    assert pem_line_blocks(items) == [(2, 1 + len(lines))]


def test_headers_blank_lines_truncation_and_neighbours() -> None:
    """Encrypted-key headers, PGP's blank line and checksum, a missing END, and text sharing the
    first or last item are all part of the block."""
    lines = pem_lines(2, "RSA ")
    encrypted = [
        lines[0],
        "Proc-Type: 4,ENCRYPTED\n",
        "DEK-Info: AES-128-CBC,0123456789ABCDEF\n",
        "\n",
        *lines[1:],
    ]
    assert pem_line_blocks(encrypted) == [(0, len(encrypted) - 1)]
    pgp = [
        "-----BEGIN PGP PRIVATE KEY BLOCK-----",
        "Version: GnuPG v2",
        "",
        *pem_lines(3, newline="")[1:-1],
        "=a1B2",
    ]
    pgp.append("-----END PGP PRIVATE KEY BLOCK-----")
    assert pem_line_blocks(pgp) == [(0, len(pgp) - 1)]
    truncated = pem_lines(4, end=False)
    assert pem_line_blocks([*truncated, 42]) == [(0, len(truncated) - 1)]
    shared = pem_lines(5)
    shared[0] = "here is the key:\n" + shared[0]
    shared[-1] += "and that was it"
    assert pem_line_blocks(shared) == [(0, len(shared) - 1)]


def test_two_keys_and_chunks_of_several_lines() -> None:
    """Two keys in one list are two blocks; items holding several lines each are read as lines."""
    first, second = pem_lines(6), pem_lines(7, "EC ")
    assert pem_line_blocks([*first, "between", *second]) == [
        (0, len(first) - 1),
        (len(first) + 1, len(first) + len(second)),
    ]
    text = "".join(first)
    chunks = [text[i : i + 200] for i in range(0, len(text), 200)]
    assert pem_line_blocks(chunks) == [(0, len(chunks) - 1)]


@pytest.mark.parametrize(
    "items",
    [
        ["-----BEGIN RSA PRIVATE KEY-----", "...", "-----END RSA PRIVATE KEY-----"],  # a placeholder
        [
            "-----BEGIN PUBLIC KEY-----",
            "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA",
            "-----END PUBLIC KEY-----",
        ],
        [
            "-----BEGIN CERTIFICATE-----",
            "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA",
            "-----END CERTIFICATE-----",
        ],
        ["-----BEGIN RSA PRIVATE KEY-----"],  # nothing after it
        ["-----BEGIN RSA PRIVATE KEY-----", 7, "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA"],
        ["".join(pem_lines(8))],  # one item holding a whole key: the text rule's to redact
        ["how to make a key:", "openssl genrsa", "then -----END RSA PRIVATE KEY----- marks the end"],
    ],
)
def test_lists_that_are_not_split_keys(items: list[object]) -> None:
    """Placeholders, public keys, certificates, a lone BEGIN, a non-string line and whole-key items
    are no split key."""
    assert pem_line_blocks(items) == []


def test_pem_line_blocks_reads_a_long_list_once() -> None:
    """Many BEGIN lines with long bodies and no END are each read once (and each is a block)."""
    body = [b62(Random(9), 64) for _ in range(50)]
    items: list[object] = []
    for _ in range(2_000):
        items += ["-----BEGIN PRIVATE KEY-----", *body]
    blocks = pem_line_blocks(items)
    assert len(blocks) == 2_000
    assert blocks[-1] == (len(items) - 51, len(items) - 1)
