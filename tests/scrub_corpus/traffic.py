"""Realistic, secret-free agent traffic, the same for the same seed: what the rule table must let pass.

Four kinds of chunk, as an agent run produces them:

* ``prose`` — the Python reference documentation and the standard library's
  docstrings (real English about code), plus assistant-style messages;
* ``code`` — slices of the standard library's own source, plus configuration
  files (Compose, CI workflows, .env templates) that name secrets without
  holding any;
* ``json`` — tool outputs: file reads, search results, chat completions,
  API listings, images;
* ``logs`` — access logs, application logs, CI, git and container output.

Real text comes from the running Python's standard library
(``sysconfig.get_paths()["stdlib"]``), so nothing but Python is needed; the
rest is filled in from a seeded RNG. It is built to be hard on the rules:
git SHAs, sha256 digests, UUIDs, base64 image data, hex request ids,
pagination tokens, long identifiers, versions, dates, IP addresses, order
numbers, "password" in prose and ``${DB_PASSWORD}`` placeholders — but no
credential, card, IBAN, SSN or phone number (emails do appear: they are PII,
not secrets).

The real text is read in ``stdlib_text``, the templates and tool outputs are
``shapes``; this module makes the chunks of each kind from them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from scrub_corpus.shapes import CONFIGS, LOG_LINES, assistant_message, expand, tool_output
from scrub_corpus.stdlib_text import stdlib_code, stdlib_prose

KINDS: tuple[str, ...] = ("prose", "code", "json", "logs")


def mixed_traffic(total_bytes: int = 5_000_000, seed: int = 0) -> list[str]:
    """About ``total_bytes`` of UTF-8 text in chunks of every kind, shuffled by ``seed``."""
    by_kind = traffic_by_kind(total_bytes, seed)
    chunks = [chunk for kind in KINDS for chunk in by_kind[kind]]
    random.Random(f"mix:{seed}").shuffle(chunks)
    return chunks


def traffic_by_kind(
    total_bytes: int = 5_000_000, seed: int = 0, kinds: tuple[str, ...] = KINDS
) -> dict[str, list[str]]:
    """About ``total_bytes / len(kinds)`` of UTF-8 text of each kind, as lists of chunks."""
    share = total_bytes // max(1, len(kinds))
    by_kind: dict[str, list[str]] = {}
    for kind in kinds:
        rng = random.Random(f"{kind}:{seed}")
        chunks: list[str] = []
        size = 0
        while size < share:
            chunks.append(_MAKERS[kind](rng))
            size += len(chunks[-1].encode())
        by_kind[kind] = chunks
    return by_kind


def _prose(rng: random.Random) -> str:
    return stdlib_prose(rng) if rng.random() < 0.75 else assistant_message(rng)


def _code(rng: random.Random) -> str:
    return stdlib_code(rng) if rng.random() < 0.85 else expand(rng.choice(CONFIGS), rng)


def _json(rng: random.Random) -> str:
    return json.dumps(tool_output(rng), indent=rng.choice([None, 2]))


def _logs(rng: random.Random) -> str:
    return "\n".join(expand(rng.choice(LOG_LINES), rng) for _ in range(rng.randrange(10, 60))) + "\n"


_MAKERS: dict[str, Callable[[random.Random], str]] = {
    "prose": _prose,
    "code": _code,
    "json": _json,
    "logs": _logs,
}
