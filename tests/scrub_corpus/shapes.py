"""The shapes of secret-free agent traffic: templates with generated values, and tool outputs.

``{name}`` slots in a template are filled from a seeded RNG with values that
are hard on the rules — git SHAs, sha256 digests, UUIDs, base64, hex request
ids, pagination tokens, long identifiers, versions, dates, IP addresses, order
numbers — but never a credential; ``${X}`` placeholders stay as they are.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import uuid
from collections.abc import Callable

from scrub_corpus.stdlib_text import stdlib_code, stdlib_prose

_B62 = string.ascii_letters + string.digits
_WORD_LIST = (
    "run step agent tool cache index batch queue worker lease retry budget report summary draft plan review "
    "deploy build release branch commit schema table column shard replica backup snapshot export import "
    "invoice order customer session config feature metric trace span event alert incident"
)
_WORDS = tuple(_WORD_LIST.split())
_VALUES: dict[str, Callable[[random.Random], str]] = {
    "hex8": lambda r: r.randbytes(4).hex(),
    "hex16": lambda r: r.randbytes(8).hex(),
    "hex32": lambda r: r.randbytes(16).hex(),
    "sha": lambda r: r.randbytes(20).hex(),
    "sha256": lambda r: r.randbytes(32).hex(),
    "uuid": lambda r: str(uuid.UUID(int=r.getrandbits(128), version=4)),
    "b64": lambda r: base64.b64encode(r.randbytes(r.randrange(24, 60))).decode(),
    "b62": lambda r: "".join(r.choice(_B62) for _ in range(24)),
    "ip": lambda r: r.choice(["203.0.113.", "198.51.100.", "192.0.2.", "10.0.3."]) + str(r.randrange(1, 255)),
    "port": lambda r: str(r.randrange(1024, 65535)),
    "iso": lambda r: (
        f"2024-{r.randrange(1, 13):02}-{r.randrange(1, 29):02}T{r.randrange(24):02}:"
        f"{r.randrange(60):02}:{r.randrange(60):02}.{r.randrange(1000):03}Z"
    ),
    "date": lambda r: f"2024-{r.randrange(1, 13):02}-{r.randrange(1, 29):02}",
    "time": lambda r: (
        f"{r.randrange(24):02}:{r.randrange(60):02}:{r.randrange(60):02},{r.randrange(1000):03}"
    ),
    "epoch": lambda r: str(r.randrange(1_600_000_000, 1_800_000_000)),
    "int": lambda r: str(r.randrange(1, 100_000)),
    "ms": lambda r: f"{r.random() * 900:.1f}",
    "version": lambda r: f"{r.randrange(0, 5)}.{r.randrange(0, 30)}.{r.randrange(0, 20)}",
    "word": lambda r: r.choice(_WORDS),
    "ident": lambda r: "_".join(r.choice(_WORDS) for _ in range(r.randrange(2, 5))),
    "path": lambda r: "/".join(["src", *(r.choice(_WORDS) for _ in range(r.randrange(1, 4)))]) + ".py",
    "status": lambda r: r.choice(
        ["200", "200", "200", "201", "204", "301", "304", "400", "401", "403", "404", "500"]
    ),
    "method": lambda r: r.choice(["GET", "GET", "POST", "PUT", "DELETE", "PATCH"]),
    "level": lambda r: r.choice(["INFO", "INFO", "DEBUG", "WARNING", "ERROR"]),
    "user": lambda r: r.choice(["deploy", "alice", "bob", "svc-runner", "admin", "ci"]),
    "order": lambda r: f"ORD-{r.randrange(2019, 2026)}-{r.randrange(1000):04}-{r.randrange(10000):04}",
    "email": lambda r: f"{r.choice(['alice', 'bob', 'noreply', 'ci-bot'])}@example.com",
    "doc": lambda r: stdlib_prose(r).split("\n", 1)[0][:200],
}
_SLOT = re.compile(r"\{(" + "|".join(_VALUES) + r")\}")  # only known names: ${X} stays as it is


def expand(template: str, rng: random.Random) -> str:
    return _SLOT.sub(lambda m: _VALUES[m.group(1)](rng), template)


LOG_LINES = (
    '{ip} - - [09/May/2024:{time} +0000] "{method} /api/v1/runs/{uuid}/steps?page=2&limit=50 HTTP/1.1" '
    '{status} {int} "-" "python-httpx/0.27.0" rt={ms} req_id={hex32}',
    "{date} {time} {level} [safepoint.worker] claimed run {uuid} step {int} lease epoch {int} in {ms} ms",
    'ts={iso} level=info msg="token refreshed" user_id={int} expires_in=3600 '
    "trace_id={hex32} span_id={hex16}",
    'ts={iso} level=warn msg="login failed: invalid password" user={user} ip={ip} attempt={int}',
    "{date} {time} INFO password reset email sent to {email} (request {uuid})",
    "May  9 {time} web-1 sshd[{int}]: Accepted publickey for {user} from {ip} port {port} ssh2: ED25519 "
    "SHA256:{b64}",
    "May  9 {time} web-1 sshd[{int}]: Failed password for invalid user {user} from {ip} port {port} ssh2",
    "commit {sha}\nAuthor: CI Bot <{email}>\nDate:   {iso}\n\n    {doc}\n",
    "#12 [builder 3/7] RUN pip install --no-cache-dir -r requirements.txt\n"
    "#12 sha256:{sha256} {ms}MB / 48.2MB",
    "  Downloading orjson-{version}-cp311-cp311-manylinux_2_17_x86_64.whl (142 kB)\n  Hash: sha256:{sha256}",
    "Normal  Pulled  pod/api-{hex8}-x2x9z  Successfully pulled image "
    '"registry.example.com/api@sha256:{sha256}"',
    "{date} {time} ERROR order {order} failed: upstream 503 after {ms} ms (retry {int} of 5)",
    "{date} {time} DEBUG loaded config: database.password=*** api_token=<redacted> secret_name=prod/{word}",
    '  File "/usr/lib/python3.11/{word}.py", line {int}, in {ident}\n    raise {word}Error(msg)',
    "PASSED tests/test_{ident}.py::test_{ident} [ {int}%] in {ms}s",
    '{iso} etag=W/"{hex32}" cache=HIT object={path} version={version} build={epoch}',
    'ts={iso} level=info msg="request" method=POST path=/oauth/token grant_type=refresh_token '
    "status={status}",
    "{date} {time} DEBUG GET /v1/items?page_token={b64}&limit=50 -> {status} Authorization: Bearer ***",
    "{date} {time} INFO connected to postgresql://app@db-1.internal:5432/app (pool {int}) and redis://:***@cache",
    "{date} {time} WARNING disk-usage-alert fired for risk-score-{version} on task-runner-{hex8}",
)
CONFIGS = (
    "services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_USER: app\n"
    "      POSTGRES_PASSWORD: ${POSTGRES_PASSWORD}\n  api:\n    environment:\n"
    "      DATABASE_URL: postgresql://app:${POSTGRES_PASSWORD}@db:5432/app\n"
    "      OPENAI_API_KEY: ${OPENAI_API_KEY}\n",
    "# .env.example - copy to .env and fill in\nOPENAI_API_KEY=your-api-key-here\nDB_PASSWORD=changeme\n"
    "SECRET_KEY=<generate-one>\nGITHUB_TOKEN=\nSTRIPE_SECRET_KEY=sk_live_...\nPASSWORD_MIN_LENGTH=12\n",
    "jobs:\n  release:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n"
    "      - run: make publish\n        env:\n          TWINE_PASSWORD: ${{ secrets.PYPI_TOKEN }}\n"
    "          GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}\n",
    "import os\n\nSECRET_KEY = os.environ['SECRET_KEY']\nDATABASES = {'default': {'PASSWORD': "
    "os.getenv('DB_PASSWORD'), 'HOST': '{ip}', 'PORT': {port}}}\nAPI_TOKEN = settings.API_TOKEN\n",
    "const apiKey = process.env.API_KEY;\nconst headers = { Authorization: `Bearer ${token}` };\n"
    "fetch(url, { headers }).then((r) => r.json());\n",
    'resource "aws_db_instance" "main" {\n  username = "app"\n  password = var.db_password\n'
    '  identifier = "{ident}"\n}\n',
    "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: {word}-db\n"
    "        key: password\n",
    "tokens = tokenizer.encode(text)\nmax_tokens = 4096\nif len(tokens) > max_tokens:\n"
    "    tokens = tokens[:max_tokens]\npassword_hash = bcrypt.hashpw(password, bcrypt.gensalt())\n",
)
_SENTENCES = (
    "I rotated the API token for the {word} service; the new one is stored in the vault, not here.",
    "The password policy requires 12 characters; the reset link expires after 30 minutes.",
    "Order {order} shipped on {date}; the carrier's tracking page shows it in transit.",
    "Build {version} ({sha}) passed on {date} — {int} tests, {ms} s.",
    "Set password=${DB_PASSWORD} in the compose file and never commit the real value.",
    "The request {uuid} from {ip} hit the cache (etag {hex32}).",
    "Use Bearer authentication: the client sends the token in the Authorization header.",
    "Your secret sauce is the {ident} step; the token budget is {int} tokens per run.",
    "Commit {sha} changed {path}; the image digest is sha256:{sha256}.",
    "I read {path} and found {int} call sites of {ident}.",
    "The secret to fast builds is caching; run `export GITHUB_TOKEN=...` first, or pass api_key=<your-key>.",
    "Invoice INV-{int} for order {order} is due {date}; reference {hex8}-{int}.",
)


def assistant_message(rng: random.Random) -> str:
    return " ".join(expand(rng.choice(_SENTENCES), rng) for _ in range(rng.randrange(3, 12)))


# -- tool outputs -------------------------------------------------------------------


def tool_output(rng: random.Random) -> object:
    """One tool output: generated values in the shapes real APIs return."""
    v = {name: make(rng) for name, make in _VALUES.items() if name not in ("doc",)}
    pick = rng.randrange(8)
    if pick == 0:
        content = stdlib_code(rng)
        return {
            "tool_use_id": "toolu_" + v["b62"],
            "path": v["path"],
            "content": content,
            "sha256": v["sha256"],
        }
    if pick == 1:
        hits = [
            {
                "title": v["ident"],
                "url": f"https://docs.example.org/{v['word']}#{_VALUES['hex8'](rng)}",
                "snippet": stdlib_prose(rng)[:400],
            }
            for _ in range(rng.randrange(2, 6))
        ]
        return {"request_id": v["hex32"], "results": hits, "next_page_token": v["b64"]}
    if pick == 2:
        data = base64.b64encode(b"\x89PNG\r\n\x1a\n" + rng.randbytes(rng.randrange(1500, 12000))).decode()
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    if pick == 3:
        call = {
            "id": "call_" + v["b62"],
            "type": "function",
            "function": {"name": v["ident"], "arguments": json.dumps({"path": v["path"], "limit": 50})},
        }
        message = {"role": "assistant", "content": assistant_message(rng), "tool_calls": [call]}
        usage = {
            "prompt_tokens": int(v["int"]),
            "completion_tokens": 312,
            "total_tokens": int(v["int"]) + 312,
        }
        return {
            "id": "chatcmpl-" + v["b62"],
            "created": int(v["epoch"]),
            "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": message}],
            "usage": usage,
            "system_fingerprint": "fp_" + v["hex8"],
        }
    if pick == 4:
        return [
            {
                "sha": _VALUES["sha"](rng),
                "node_id": "C_kwDO" + v["b62"],
                "commit": {
                    "author": {"name": "CI Bot", "email": v["email"], "date": v["iso"]},
                    "message": _VALUES["doc"](rng),
                },
                "parents": [{"sha": v["sha"]}],
            }
            for _ in range(rng.randrange(2, 8))
        ]
    if pick == 5:
        objects = [
            {
                "Key": _VALUES["path"](rng),
                "LastModified": v["iso"],
                "ETag": f'"{_VALUES["hex32"](rng)}"',
                "Size": int(v["int"]),
                "StorageClass": "STANDARD",
            }
            for _ in range(rng.randrange(3, 12))
        ]
        return {
            "ResponseMetadata": {"RequestId": v["uuid"], "HTTPStatusCode": 200},
            "Contents": objects,
            "NextContinuationToken": v["b64"],
            "KeyCount": len(objects),
        }
    if pick == 6:
        return {
            "Id": v["sha256"],
            "RepoDigests": [f"python@sha256:{v['sha256']}"],
            "Config": {
                "Env": [
                    "PATH=/usr/local/bin:/usr/bin",
                    f"PYTHON_VERSION={v['version']}",
                    "DB_PASSWORD_FILE=/run/secrets/db_password",
                    "GPG_KEY=A035C8C19219BA821ECEA86B64E628F8D684696D",
                ]
            },
        }
    return {
        "token_type": "Bearer",
        "expires_in": 3600,
        "scope": "repo read:org",
        "password_policy": {"min_length": 12, "require_digit": True},
        "api_key_id": v["uuid"],
        "secret_name": f"prod/{v['word']}",
        "integrity": "sha512-" + v["b64"],
        "ClientToken": v["uuid"],
        "NextToken": base64.b64encode(
            json.dumps({"offset": int(v["int"]), "shard": v["hex8"]}).encode()
        ).decode(),
        "order_id": v["order"],
        "client_ip": v["ip"],
    }
