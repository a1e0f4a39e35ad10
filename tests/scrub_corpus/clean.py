"""Secret-free traffic shaped like what the newer rules look for: the false-positive side of issue 13.

``lookalike_traffic(total_bytes, seed)`` returns chunks of ordinary agent text that come close to
the formats without being credentials: CSV exports with ids and regions, URL-encoded redirect URLs
(both hex cases) and JSON with escaped slashes (once and twice) but no password, base64 of indented
JSON configs, long values under keys that hold no secret, Windows paths in JSON, and prose about
passwords, tokens, JWTs and PEM files. The rules must find nothing in any of it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from random import Random
from urllib.parse import quote

from scrub_corpus.fakes import B62, HEX, pick

WORDS = (
    *("report", "region", "total", "status", "deploy", "build", "cache", "index"),
    *("shard", "replica", "tenant", "invoice", "order", "customer", "session", "window"),
    *("request", "response", "latency", "budget", "quota", "summary", "pipeline", "stage"),
    *("artifact", "release"),
)


def words(rng: Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def csv_export(rng: Random) -> str:
    head = rng.choice(["id,name,region,key_id,updated", "User name,Groups,Last login,Region,Access key age"])
    rows = [
        ",".join(
            [
                str(rng.randrange(10**5)),
                rng.choice(["alice", "svc-deploy", "Bob Smith", "report"]),
                rng.choice(["ASIA-PACIFIC", "EU-WEST", "us-east-1", "ASIA"]),
                rng.choice(
                    ["key-" + pick(rng, HEX, 12), "AKIA-rotation-due", str(rng.randrange(400)) + " days"]
                ),
                f"2024-0{rng.randrange(1, 10)}-1{rng.randrange(10)}",
            ]
        )
        for _ in range(rng.randrange(3, 12))
    ]
    return "\n".join([head, *rows, ""])


def encoded_urls(rng: Random) -> str:
    target = rng.choice(
        [
            f"https://example.com/dash?tab={rng.randrange(9)}&q={rng.choice(WORDS)}",
            f"https://{rng.choice(WORDS)}@git.example.com/org/repo.git",  # a user, no password
            f"mailto:{rng.choice(WORDS)}@example.com",
            "postgres://app@db.internal:5432/app",
            "redis://:${REDIS_PASSWORD}@cache:6379/0",
        ]
    )
    text = quote(target, safe="")
    if rng.random() < 0.5:
        text = text.replace("%3A", "%3a").replace("%2F", "%2f").replace("%40", "%40")
    return f"GET /login?next={text}&state={pick(rng, B62, 16)} 302 {rng.randrange(900)}ms"


def escaped_json(rng: Random) -> str:
    value = {
        "url": f"https://cdn.example.com/{rng.choice(WORDS)}/{pick(rng, HEX, 8)}.js",
        "next": "/login",
        "repo": f"git@github.com:org/{rng.choice(WORDS)}.git",
        "path": f"C:\\Users\\{rng.choice(WORDS)}\\AppData",
    }
    once = json.dumps(value).replace("/", "\\/")  # a serializer that escapes "/"
    return once if rng.random() < 0.5 else json.dumps({"body": once})


def base64_config(rng: Random) -> str:
    config = {"name": rng.choice(WORDS), "replicas": rng.randrange(9), "labels": {"tier": rng.choice(WORDS)}}
    blob = base64.b64encode(json.dumps(config, indent=rng.choice([2, 4, "\t"])).encode()).decode()
    return f"data:\n  config.json: {blob}\n  version: {rng.randrange(9)}.{rng.randrange(9)}"


def long_values(rng: Random) -> str:
    return "\n".join(
        [
            f'"description": "{words(rng, 60)}"',
            f"checksum={pick(rng, HEX, 64)}",
            f'"nextPageToken": "{pick(rng, B62, 300)}"',
            f"tokenizer_config={'_'.join(rng.choice(WORDS) for _ in range(50))}",
            f"password_policy=min_length:12,max_age:{rng.randrange(90)},history:{rng.randrange(9)}",
            f'"secret_name": "prod/{rng.choice(WORDS)}/{rng.choice(WORDS)}"',
        ]
    )


def prose(rng: Random) -> str:
    return rng.choice(
        [
            "The JWT header is base64url JSON; an indented header starts with ewog instead of eyJ.",
            "Rotate the access key in the console, then download the new credentials CSV once.",
            "A PEM file starts with -----BEGIN and ends with -----END; never paste the private key here.",
            "Use postgres%3A%2F%2F in the query string only when the URL has no password in it.",
            f"The {rng.choice(WORDS)} token budget was exceeded; the password reset link expires in 1 h.",
        ]
    )


KINDS: tuple[Callable[[Random], str], ...] = (
    csv_export,
    encoded_urls,
    escaped_json,
    base64_config,
    long_values,
    prose,
)


def lookalike_traffic(total_bytes: int, seed: int = 0) -> list[str]:
    """About ``total_bytes`` of look-alike chunks, every kind in turn."""
    rng, chunks, size = Random(seed), [], 0
    while size < total_bytes:
        chunk = "\n".join(kind(rng) for kind in KINDS if rng.random() < 0.8) or prose(rng)
        chunks.append(chunk)
        size += len(chunk.encode())
    return chunks
