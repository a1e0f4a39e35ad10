"""The leak test: 100 canary secrets planted everywhere, then every byte safepoint wrote is searched.

Canaries go into every field (messages, state, cursors, pending action,
labels, counter names, large tool outputs that go to the blob store) in every
encoding a harness produces (raw, JSON-escaped, URL-encoded, base64,
base64url, inside Authorization headers) across 1,000 checkpoints. Afterwards
the raw SQLite file and its WAL, the blob directory, a ``pg_dump`` of the
PostgreSQL schema (bytea columns decoded, the blob table included), the
captured log records (the SQL trace included) and the text of every exception
raised on the way are searched for each canary in each encoding: there must
be no hit at all.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from safepoint import Checkpoint, Secrets, Store
from safepoint.scrub.automata import Matcher

CANARIES = 100
RUNS, STEPS = 20, 50  # 1,000 checkpoints


def canaries() -> dict[str, str]:
    rng = random.Random(7)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    out = {}
    for i in range(CANARIES):
        body = "".join(rng.choice(alphabet) for _ in range(24))
        # Some with characters that every encoding changes.
        out[f"CANARY_{i:03d}"] = body if i % 3 else f'c{body[:10]}"/+ &={body[10:]}'
    return out


def encodings(value: str) -> list[str]:
    raw = value.encode()
    return [
        value,
        json.dumps(value)[1:-1],
        quote(value, safe=""),
        quote_plus(value),
        base64.b64encode(raw).decode(),
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(raw).decode(),
    ]


def planted(value: str, rng: random.Random) -> str:
    """``value`` written the way some harness would, chosen at random."""
    raw = value.encode()
    forms = [
        value,
        f"the key is {value}.",
        json.dumps({"api_key": value, "n": 1}),
        json.dumps(json.dumps({"nested": value})),
        f"https://api.example.test/v1?key={quote(value, safe='')}&x=1",
        f"q={quote_plus(value)}",
        base64.b64encode(raw).decode(),
        f"blob {base64.urlsafe_b64encode(raw).decode()} end",
        f"Authorization: Bearer {value}",
        "Authorization: Basic " + base64.b64encode(b"svc:" + raw).decode(),
    ]
    return rng.choice(forms)


def fill(cp: Checkpoint, secrets: dict[str, str], rng: random.Random) -> None:
    """Plant canaries in every field of ``cp``."""
    pick = list(secrets.values())

    def one() -> str:
        return planted(rng.choice(pick), rng)

    cp.messages.append({"role": "user", "content": one()})
    cp.messages.append(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": one()}],
            "tool_calls": [{"id": f"c{cp.step}", "function": {"name": "http", "arguments": one()}}],
        }
    )
    cp.messages.append({"role": "tool", "content": one(), one(): "key-position"})
    cp.state = {"note": one(), "deep": {"list": [one(), {"x": one()}]}, one(): 1}
    cp.cursors = {"batch": {"done": cp.step, "last": one()}}
    cp.pending_action = {"tool": "http", "args": {"headers": {"Authorization": f"Bearer {rng.choice(pick)}"}}}
    cp.labels = {"token": rng.choice(pick), "where": one()[:200]}
    if cp.step % 10 == 3:  # a tool output large enough to go to the blob store
        big = "\n".join(f"log line {i}: {one()}" for i in range(1500))
        cp.messages.append({"role": "tool", "content": big})
        cp.state["last_output"] = big
    cp.counters = {"tokens_in": cp.step * 10, f"c_{rng.choice(pick)}": 1}


def exercise(store: Store, secrets: dict[str, str], errors: list[BaseException]) -> None:
    """1,000 checkpoints with canaries, plus the errors a careless caller triggers."""
    rng = random.Random(11)
    for run in range(RUNS):
        cp = Checkpoint(run_id=f"leak-{run}")
        for step in range(STEPS):
            fill(cp, secrets, rng)
            store.save(cp)
            if step % 10 == 5:
                stale = Checkpoint(
                    run_id=cp.run_id, step=step, state={"k": rng.choice(list(secrets.values()))}
                )
                with pytest.raises(safepoint.Conflict) as conflict:
                    store.save(stale)
                errors.append(conflict.value)
                bad = cp.next()
                bad.state = {rng.choice(list(secrets.values())): {1, 2}}
                with pytest.raises(safepoint.NotJSONCompatible) as not_json:
                    store.save(bad)
                errors.append(not_json.value)
            cp = cp.next()
        loaded = store.load(cp.run_id)
        assert loaded.step == STEPS - 1
    # Under the raise policy the refusal names path and rule only.
    strict = Secrets(secrets)
    refusing = safepoint.Scrubber(secrets=strict, policy="raise")
    store.settings = type(store.settings)(refusing)
    with pytest.raises(safepoint.SecretLeak) as leak:
        store.save(Checkpoint(run_id="strict", state={"k": planted(next(iter(secrets.values())), rng)}))
    errors.append(leak.value)


def needles(secrets: dict[str, str]) -> Matcher[str]:
    return Matcher({form: name for name, value in secrets.items() for form in encodings(value)})


def hits(automaton: Matcher[str], data: bytes | str) -> list[str]:
    text = data if isinstance(data, str) else data.decode("latin-1")
    return sorted({name for _, _, name in automaton.find(text)})


def error_texts(errors: list[BaseException]) -> str:
    out = []
    for error in errors:
        current: BaseException | None = error
        while current is not None:
            out += [str(current), repr(current)]
            current = current.__cause__ or current.__context__
    return "\n".join(out)


@pytest.fixture
def trace_log(caplog: pytest.LogCaptureFixture) -> logging.Logger:
    caplog.set_level(logging.DEBUG)
    return logging.getLogger("safepoint.test.trace")


def test_nothing_reaches_the_sqlite_file_wal_logs_or_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, trace_log: logging.Logger
) -> None:
    """Zero canary hits in the SQLite file, its WAL, the SQL trace log and every exception."""
    secrets = canaries()
    path = tmp_path / "leak.db"
    store = safepoint.open_store(f"sqlite:///{path}", secrets=Secrets(secrets), trace=trace_log.debug)
    errors: list[BaseException] = []
    # Keep the WAL: copy it before close() checkpoints it into the main file.
    exercise(store, secrets, errors)
    wal = Path(f"{path}-wal").read_bytes()
    store.close()
    automaton = needles(secrets)
    assert len(wal) > 0
    assert hits(automaton, wal) == []
    assert hits(automaton, path.read_bytes()) == []
    blob_files = [p for p in Path(f"{path}.blobs").rglob("*") if p.is_file()]
    assert len(blob_files) >= RUNS * 5  # the large outputs went there, scrubbed first (once each)
    for blob in blob_files:
        assert hits(automaton, blob.read_bytes()) == []
    assert len(caplog.records) > 1000
    assert hits(automaton, "\n".join(r.getMessage() for r in caplog.records)) == []
    assert len(errors) > 40
    assert hits(automaton, error_texts(errors)) == []


def test_the_search_finds_canaries_when_nothing_is_scrubbed(tmp_path: Path) -> None:
    """Control: with scrubbing off, the same search finds the canaries (so zero hits means something)."""
    secrets = canaries()
    path = tmp_path / "control.db"
    store = safepoint.open_store(f"sqlite:///{path}", scrubber=False)
    rng = random.Random(3)
    cp = Checkpoint(run_id="control")
    for _ in range(5):
        fill(cp, secrets, rng)
        store.save(cp)
        cp = cp.next()
    store.close()
    assert len(hits(needles(secrets), path.read_bytes())) > 10


def test_nothing_reaches_a_pg_dump(caplog: pytest.LogCaptureFixture) -> None:
    """Zero canary hits in a pg_dump of the schema (bytea decoded), the logs and every exception."""
    dsn = require_postgres()
    pg_dump = shutil.which("pg_dump") or next(
        iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_dump"))), None
    )
    assert pg_dump is not None, "pg_dump is needed for the leak test"
    secrets = canaries()
    caplog.set_level(logging.DEBUG)
    with fresh_schema(dsn) as schema:
        store = safepoint.open_store(dsn, schema=schema, secrets=Secrets(secrets))
        errors: list[BaseException] = []
        try:
            exercise(store, secrets, errors)
        finally:
            store.close()
        dump = subprocess.run(
            [str(pg_dump), "--data-only", "--schema", schema, dsn], check=True, capture_output=True
        ).stdout
    # bytea columns dump as hex (\x7b22…): decode them, or a leak there would go unseen.
    decoded = b"\n".join(bytes.fromhex(h.decode()) for h in re.findall(rb"\\\\x([0-9a-f]+)", dump))
    assert len(decoded) > 100_000
    automaton = needles(secrets)
    assert hits(automaton, dump) == []
    assert hits(automaton, decoded) == []
    assert hits(automaton, "\n".join(r.getMessage() for r in caplog.records)) == []
    assert hits(automaton, error_texts(errors)) == []
