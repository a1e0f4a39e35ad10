"""``safepoint redact`` SIGKILLed at random points, then run again, ends as an uninterrupted redact.

A store is seeded once (``redact_seed_pg``: the value in messages, state, pending
actions, labels, journal entries and blobs) and copied — SQLite: the file and its blob
folder; PostgreSQL: ``CREATE DATABASE … TEMPLATE`` (digests cover ``created_at``, so a
second seeding would not do). Copy A is redacted in this process without interruption.
On copy B ``safepoint redact`` runs in child processes that are SIGKILLed (20 times on
SQLite, 5 on PostgreSQL), then the real console script finishes it. Each kill waits
until its attempt has committed a run (or found nothing left to write) and then a
random, seeded delay, so the kills land between and inside the run transactions and in
the blob deletion and free-page scrub after them; ``SAFEPOINT_CRASH_SEED`` replays one.

The killed children are forked from one preloaded interpreter (``Zygote``) that runs
the CLI's own ``main`` in each: a fresh ``safepoint`` process costs most of a second
to import, 25 of them would cost the suite more than the rest of these tests.

Then: every checkpoint of every run loads equal in A and B (and has the same digest),
the same blobs are referenced, B verifies, and each run has exactly one audit record
with the same counts in both.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

import safepoint
from conftest_postgres import DSN, require_postgres
from redact_seed_pg import VALUE, content, hits, seed_run
from safepoint import Redaction, Store
from safepoint.store.admin import verify_store
from safepoint_exe import sp

pytestmark = pytest.mark.crash

SEED = int(os.environ.get("SAFEPOINT_CRASH_SEED") or time.time_ns() % 1_000_000_007)
VALUE_ENV = "SAFEPOINT_TEST_REDACT_VALUE"
BLOB_SIZE = 70_000  # above the default blob threshold (64 KiB): the CLI opens with defaults
BLOB_EVERY = 25  # one run in this many holds blobs; the others' values stay inline

# Forks a child per request line (the CLI's arguments, as JSON) and reports its pid, then
# its wait status. The child's output goes nowhere: the final run, not these, is read.
ZYGOTE = """
import json, os, sys
from safepoint.cli import main
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            main.main(args=json.loads(line), prog_name="safepoint")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        os._exit(code)
    print(pid, flush=True)
    print(os.waitpid(pid, 0)[1], flush=True)
"""


class Zygote:
    """One preloaded interpreter that forks ``safepoint`` CLI children on request."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        self.buffer = b""

    def start(self, args: list[str]) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(args).encode() + b"\n")
        self.proc.stdin.flush()
        line = self._line(60)
        assert line is not None, "the zygote did not fork"
        return int(line)

    def ended(self, timeout: float) -> int | None:
        """The child's exit code (negative: the signal) once it ends within ``timeout``; else None."""
        line = self._line(timeout)
        return None if line is None else os.waitstatus_to_exitcode(int(line))

    def _line(self, timeout: float) -> str | None:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            assert chunk, "the zygote exited"
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture
def zygote(monkeypatch: pytest.MonkeyPatch) -> Iterator[Zygote]:
    monkeypatch.setenv(VALUE_ENV, VALUE)  # the children and the final run read the value from here
    forker = Zygote()
    yield forker
    forker.close()


def seed(store: Store, runs: int, threads: int = 1) -> list[str]:
    run_ids = [f"run-{n:04d}" for n in range(runs)]

    def one(index: int) -> None:
        size = BLOB_SIZE if index % BLOB_EVERY == 0 else 300
        seed_run(store, run_ids[index], blob_size=size)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(runs)))
    return run_ids


def kill_loop(
    zygote: Zygote, args: list[str], done: Callable[[], int], *, total: int, kills: int, window: float
) -> tuple[int, int]:
    """Start ``safepoint redact`` and SIGKILL it ``kills`` times: each attempt once it has
    committed a run (or there is none left), after a random delay up to ``window`` seconds.
    How many kills there were, and how many left some runs done and some not."""
    rng = random.Random(SEED)
    killed = midway = 0
    while killed < kills:
        before = done()
        pid = zygote.start(args)
        code = None
        while before < total and done() == before and code is None:
            code = zygote.ended(0.003)
        if code is None:
            code = zygote.ended(rng.uniform(0, window))
        if code is not None:  # it finished first: nothing left to kill
            assert code == 0
            break
        with contextlib.suppress(ProcessLookupError):  # it may have ended this very moment
            os.kill(pid, signal.SIGKILL)
        code = zygote.ended(30)
        if code == 0:
            break
        assert code == -signal.SIGKILL
        killed += 1
        midway += 0 < done() < total
    print(f"seed {SEED}: {killed} kills, {midway} with some runs redacted and some not")
    return killed, midway


def compare(a: Store, b: Store, run_ids: list[str]) -> dict[str, int]:
    """Every checkpoint, journal entry and audit record of every run alike in ``a`` and ``b``."""
    checked = {"checkpoints": 0, "digests_differ": 0}
    for run_id in run_ids:
        history_a, history_b = a.history(run_id), b.history(run_id)
        assert [info.step for info in history_a] == [info.step for info in history_b], run_id
        for info_a, info_b in zip(history_a, history_b, strict=True):
            loaded_a, loaded_b = a.load(run_id, info_a.step), b.load(run_id, info_a.step)
            assert content(loaded_a) == content(loaded_b), (run_id, info_a.step)
            checked["checkpoints"] += 1
            checked["digests_differ"] += info_a.digest != info_b.digest
        assert [e.result for e in a.recorded_calls(run_id)] == [e.result for e in b.recorded_calls(run_id)]
        records_a = [(r.redaction_id, r.counts, r.steps, r.intact) for r in a.redactions(run_id)]
        records_b = [(r.redaction_id, r.counts, r.steps, r.intact) for r in b.redactions(run_id)]
        assert len(records_a) == 1, run_id
        assert records_b == records_a, run_id
    return checked


def digests_in(rows: list[Any]) -> set[str]:
    """The blob digests in ``blobs`` columns: JSON text (SQLite) or jsonb, decoded (psycopg)."""
    return {
        digest for (column,) in rows for digest in (json.loads(column) if isinstance(column, str) else column)
    }


REFERENCED = (
    "SELECT blobs FROM safepoint_checkpoints WHERE blobs IS NOT NULL"
    " UNION ALL SELECT blobs FROM safepoint_calls WHERE blobs IS NOT NULL"
)
REDACTED_RUNS = "SELECT count(*) FROM safepoint_redactions"

# -- SQLite ---------------------------------------------------------------------------------

SQLITE_RUNS = 400
SQLITE_KILLS = 20


def sqlite_rows(path: Path, query: str) -> list[Any]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as conn:
        return conn.execute(query).fetchall()


def test_sqlite_redact_killed_20_times_ends_as_uninterrupted(tmp_path: Path, zygote: Zygote) -> None:
    """20 SIGKILLs of safepoint redact on a SQLite store, then a rerun: the same final
    store as an uninterrupted redact (checkpoints, digests, blobs, one record per run)."""
    a_db, b_db = tmp_path / "a" / "state.db", tmp_path / "b" / "state.db"
    a_db.parent.mkdir()
    store = safepoint.open_store(f"sqlite:///{a_db}")
    run_ids = seed(store, SQLITE_RUNS, threads=4)
    store.close()
    shutil.copytree(a_db.parent, b_db.parent)

    a = safepoint.open_store(f"sqlite:///{a_db}")
    started = time.monotonic()
    done = a.redact(Redaction(values=[VALUE]))
    took = time.monotonic() - started
    assert len(done.runs) == SQLITE_RUNS
    print(f"uninterrupted redact of {SQLITE_RUNS} runs: {took:.2f} s")

    args = ["redact", "--store", f"sqlite:///{b_db}", "--value-env", VALUE_ENV, "--json"]
    killed, midway = kill_loop(
        zygote,
        args,
        lambda: int(sqlite_rows(b_db, REDACTED_RUNS)[0][0]),
        total=SQLITE_RUNS,
        kills=SQLITE_KILLS,
        window=took / (2 * SQLITE_KILLS),
    )
    assert killed == SQLITE_KILLS
    assert midway >= SQLITE_KILLS * 2 // 3
    final = sp(tmp_path, *args)
    assert final.returncode == 0, final.stderr
    assert json.loads(final.stdout)["failed"] == []

    b = safepoint.open_store(f"sqlite:///{b_db}")
    checked = compare(a, b, run_ids)
    assert checked == {"checkpoints": 3 * SQLITE_RUNS, "digests_differ": 0}
    assert digests_in(sqlite_rows(a_db, REFERENCED)) == digests_in(sqlite_rows(b_db, REFERENCED))
    report = verify_store(b)
    assert report.ok, report.failures[:3]
    assert len(report.redactions) == SQLITE_RUNS
    a.close()
    b.close()
    # No value left in B's file or blob folder. B may keep more blob files than A: a killed
    # attempt's new blobs, written before its transaction that never committed (unreferenced,
    # redacted, gc's). What it must not keep is an old blob, holding the value, that A deleted.
    files_a = {path.name for path in (a_db.parent / "state.db.blobs").rglob("*") if path.is_file()}
    files_b = {path.name for path in (b_db.parent / "state.db.blobs").rglob("*") if path.is_file()}
    leftover = {path.name: hits(path.read_bytes()) for path in b_db.parent.rglob("*") if path.is_file()}
    assert {name: count for name, count in leftover.items() if count} == {}
    assert files_a <= files_b


# -- PostgreSQL -----------------------------------------------------------------------------

PG_RUNS = 100
PG_KILLS = 5


@pytest.fixture
def pg_databases() -> Iterator[tuple[str, str]]:
    """Two database names (A seeded here, B made from it as a template), dropped at the end."""
    dsn = require_postgres()
    names = [f"sp_redact_{kind}_{uuid.uuid4().hex[:10]}" for kind in ("a", "b")]
    try:
        yield names[0], names[1]
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for name in names:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def pg_url(name: str) -> str:
    """The test server's DSN pointed at database ``name``."""
    return urlunsplit(urlsplit(DSN)._replace(path=f"/{name}", query=""))


def pg_rows(name: str, query: str) -> list[Any]:
    with psycopg.connect(pg_url(name), autocommit=True) as conn:
        conn.execute("SET search_path TO safepoint")
        return conn.execute(query).fetchall()  # type: ignore[arg-type]  # test SQL


def test_postgres_redact_killed_5_times_ends_as_uninterrupted(
    pg_databases: tuple[str, str], tmp_path: Path, zygote: Zygote
) -> None:
    """5 SIGKILLs of safepoint redact on a PostgreSQL store, then a rerun: the same final
    store as an uninterrupted redact of its twin made by CREATE DATABASE … TEMPLATE."""
    name_a, name_b = pg_databases
    dsn = require_postgres()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name_a)))
    store = safepoint.open_store(pg_url(name_a), max_size=4)
    run_ids = seed(store, PG_RUNS, threads=4)
    store.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name_b), sql.Identifier(name_a))
        )

    a = safepoint.open_store(pg_url(name_a))
    started = time.monotonic()
    done = a.redact(Redaction(values=[VALUE]))
    took = time.monotonic() - started
    assert len(done.runs) == PG_RUNS
    print(f"uninterrupted redact of {PG_RUNS} runs: {took:.2f} s")

    args = ["redact", "--store", pg_url(name_b), "--value-env", VALUE_ENV, "--json"]
    killed, midway = kill_loop(
        zygote,
        args,
        lambda: int(pg_rows(name_b, REDACTED_RUNS)[0][0]),
        total=PG_RUNS,
        kills=PG_KILLS,
        window=took / (2 * PG_KILLS),
    )
    assert killed == PG_KILLS
    assert midway >= PG_KILLS * 2 // 3
    final = sp(tmp_path, *args)
    assert final.returncode == 0, final.stderr

    b = safepoint.open_store(pg_url(name_b))
    checked = compare(a, b, run_ids)
    assert checked == {"checkpoints": 3 * PG_RUNS, "digests_differ": 0}
    assert digests_in(pg_rows(name_a, REFERENCED)) == digests_in(pg_rows(name_b, REFERENCED))
    report = verify_store(b)
    assert report.ok, report.failures[:3]
    a.close()
    b.close()
    # No blob row A deleted that B keeps (a rerun deletes only the old blobs of the runs it
    # rewrote), so no row of B holds the value.
    kept = "SELECT digest, data FROM safepoint_blobs ORDER BY digest"
    holding = [digest for digest, data in pg_rows(name_b, kept) if hits(bytes(data))]
    assert holding == []
    blobs = "SELECT digest FROM safepoint_blobs ORDER BY digest"
    assert pg_rows(name_b, blobs) == pg_rows(name_a, blobs)
