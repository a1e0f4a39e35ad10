"""The leak test for ``bytes``: secrets and tokens inside binary values never reach storage.

A raw HTTP body or a file a tool read is ``bytes``. Registered secrets (in
the encodings a harness produces) and unregistered token-shaped values are
planted in ``bytes`` values in state, messages and the pending action, and
in a LangGraph checkpoint's channels; afterwards the SQLite file and its WAL,
the blob directory, a ``pg_dump`` of the PostgreSQL schema (bytea decoded,
the blob table included), the log records and every exception are searched:
no hit at all. Each planted value comes back as a ``bytes`` placeholder, and
the LangGraph thread loads again.
"""

from __future__ import annotations

import logging
import random
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from safepoint import Checkpoint, Secrets, Store
from safepoint.adapters.langgraph import SafepointSaver
from safepoint.scrub.automata import Matcher
from test_leak import canaries, encodings, error_texts, hits

STEPS = 30


def tokens(rng: random.Random) -> list[str]:
    """Unregistered values the token rules know: GitHub, Slack, AWS, Anthropic, OpenAI."""
    alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

    def pick(n: int, alphabet: str = alnum) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    return [
        "ghp_" + pick(36),
        "xoxb-" + pick(11, "0123456789") + "-" + pick(12, "0123456789") + "-" + pick(24),
        "sk-ant-api03-" + pick(93) + "AA",
        "sk-proj-" + pick(48),
        "glpat-" + pick(20),
    ]


def body(secret: str, token: str, rng: random.Random) -> bytes:
    """A binary value holding a secret and a token, sometimes after undecodable bytes."""
    prefix = rng.choice([b"", b"\xff\xfe\x00garbage ", b"%PDF-1.7\n\x80\x81 ", b"HTTP/1.1 200 OK\r\n\r\n"])
    return prefix + f'{{"key": "{secret}", "gh": "{token}"}}'.encode() + rng.choice([b"", b"\x00\x9c tail"])


def exercise(store: Store, secrets: dict[str, str], planted: list[str], errors: list[BaseException]) -> None:
    rng = random.Random(5)
    values = list(secrets.values())
    cp = Checkpoint(run_id="bytes-leak")
    for step in range(STEPS):
        secret, token = rng.choice(values), rng.choice(planted)
        cp.messages.append({"role": "tool", "content": "read a file", "data": body(secret, token, rng)})
        cp.state = {"http": body(secret, token, rng), "list": [body(secret, token, rng)]}
        cp.pending_action = {"tool": "upload", "args": {"payload": body(secret, token, rng)}}
        cp.cursors = {"n": step}
        store.save(cp)
        cp = cp.next()
    loaded = store.load("bytes-leak", resolve_secrets=True)
    assert loaded.step == STEPS - 1
    assert isinstance(loaded.state["http"], bytes)
    assert loaded.state["http"].startswith(b"[REDACTED:")
    assert all(isinstance(m["data"], bytes) for m in loaded.messages)
    strict = safepoint.open_store("memory://", secrets=Secrets(secrets), secret_policy="raise")
    with pytest.raises(safepoint.SecretLeak) as leak:
        strict.save(Checkpoint(run_id="s", state={"b": body(values[0], planted[0], rng)}))
    errors.append(leak.value)


def automaton(secrets: dict[str, str], planted: list[str]) -> Matcher[str]:
    """Every planted value: each secret in each encoding, and each token as it is."""
    found = {form: name for name, value in secrets.items() for form in encodings(value)}
    found.update({token: token[:6] for token in planted})
    return Matcher(found)


def langgraph_put(url: str, secrets: dict[str, str], planted: list[str], **options: Any) -> None:
    """A LangGraph checkpoint whose channels hold bytes with a secret and a token; it loads again."""
    value = next(iter(secrets.values()))
    with SafepointSaver.from_url(url, secrets=Secrets(secrets), **options) as saver:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {
            "raw": value.encode() + b" in a channel",
            "token": b"\x00\x01" + planted[0].encode(),
            "clean": b"\x00\x01 nothing here",
        }
        checkpoint["channel_versions"] = {"raw": 1, "token": 1, "clean": 1}
        saver.put(config, checkpoint, {}, {"raw": 1, "token": 1, "clean": 1})  # type: ignore[arg-type]
    with SafepointSaver.from_url(url, secrets=Secrets(secrets), **options) as fresh:  # reads the store
        loaded = fresh.get_tuple(config)  # type: ignore[arg-type]
        assert loaded is not None
        channels = loaded.checkpoint["channel_values"]
        assert channels["raw"].startswith(b"[REDACTED:")
        assert channels["token"].startswith(b"[REDACTED:")
        assert channels["clean"] == b"\x00\x01 nothing here"


def test_no_secret_in_bytes_reaches_sqlite_blobs_logs_or_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Zero hits in the SQLite file, its WAL, the blob files, the logs and every exception."""
    caplog.set_level(logging.DEBUG)
    secrets = canaries()
    planted = tokens(random.Random(1))
    path = tmp_path / "leak.db"
    store = safepoint.open_store(
        f"sqlite:///{path}", secrets=Secrets(secrets), trace=logging.getLogger("t").debug
    )
    errors: list[BaseException] = []
    exercise(store, secrets, planted, errors)
    wal = Path(f"{path}-wal").read_bytes()
    store.close()
    langgraph_put(f"sqlite:///{tmp_path / 'graph.db'}", secrets, planted)
    needle = automaton(secrets, planted)
    assert hits(needle, wal) == []
    for file in [path, *tmp_path.rglob("*")]:
        if file.is_file():
            assert hits(needle, file.read_bytes()) == [], file.name
    assert len([p for p in Path(f"{path}.blobs").rglob("*") if p.is_file()]) >= 1
    assert hits(needle, "\n".join(r.getMessage() for r in caplog.records)) == []
    assert hits(needle, error_texts(errors)) == []


def test_no_secret_in_bytes_reaches_a_pg_dump(caplog: pytest.LogCaptureFixture) -> None:
    """Zero hits in a pg_dump of the schema (bytea decoded, blob table included), logs and errors."""
    dsn = require_postgres()
    pg_dump = shutil.which("pg_dump") or next(
        iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_dump"))), None
    )
    assert pg_dump is not None, "pg_dump is needed for the leak test"
    caplog.set_level(logging.DEBUG)
    secrets = canaries()
    planted = tokens(random.Random(2))
    errors: list[BaseException] = []
    with fresh_schema(dsn) as schema:
        store = safepoint.open_store(dsn, schema=schema, secrets=Secrets(secrets))
        try:
            exercise(store, secrets, planted, errors)
        finally:
            store.close()
        langgraph_put(dsn, secrets, planted, schema=schema)
        dump = subprocess.run(
            [str(pg_dump), "--data-only", "--schema", schema, dsn], check=True, capture_output=True
        ).stdout
    decoded = b"\n".join(bytes.fromhex(h.decode()) for h in re.findall(rb"\\\\x([0-9a-f]+)", dump))
    assert b"[REDACTED:" in decoded  # the placeholders are there, in the blob table
    needle = automaton(secrets, planted)
    assert hits(needle, dump) == []
    assert hits(needle, decoded) == []
    assert hits(needle, "\n".join(r.getMessage() for r in caplog.records)) == []
    assert hits(needle, error_texts(errors)) == []


def test_the_search_finds_planted_bytes_when_nothing_is_scrubbed(tmp_path: Path) -> None:
    """Control: with scrubbing off, the same search finds the planted values in the blob files."""
    secrets = canaries()
    planted = tokens(random.Random(1))
    path = tmp_path / "control.db"
    with safepoint.open_store(f"sqlite:///{path}", scrubber=False) as store:
        rng = random.Random(3)
        store.save(Checkpoint(run_id="c", state={"b": body(next(iter(secrets.values())), planted[0], rng)}))
    data = b"".join(p.read_bytes() for p in Path(f"{path}.blobs").rglob("*") if p.is_file())
    assert len(hits(automaton(secrets, planted), data)) >= 2
