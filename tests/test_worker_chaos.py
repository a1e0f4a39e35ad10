"""8 worker processes drive ``Run`` over 1,000 runs while PostgreSQL is knocked down around them.

A chaos loop terminates the workers' backends every few hundred ms and
restarts the server twice. Nothing may show: 0 failed runs, 0 runs done twice
(the ledger of side effects), every run's answer equal to an uninterrupted
run's. Then the same through a real PgBouncer in transaction mode. This
restarts the shared server, so it runs in the serial ``pg_restart`` pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import safepoint
from conftest_postgres import require_postgres
from safepoint import Checkpoint, Status

HELPER = Path(__file__).parent / "helpers" / "run_worker.py"
pytestmark = pytest.mark.pg_restart
RUNS, STEPS, WORKERS = 1000, 3, 8


def require_cluster() -> None:
    if not Path("/etc/postgresql").is_dir() or os.geteuid() != 0:
        message = "needs a local PostgreSQL cluster managed by pg_ctlcluster and root"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def restart_postgres() -> None:
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
        check=True,
        capture_output=True,
        timeout=120,
    )


def wait_for_server(dsn: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextmanager
def fresh_database(dsn: str) -> Iterator[tuple[str, str]]:
    """A database of its own (so the chaos loop can kill exactly its backends): (dsn, name)."""
    name = f"sp_chaos_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(dsn, dbname=name), name
    finally:
        wait_for_server(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def as_url(conninfo: str) -> str:
    parts = conninfo_to_dict(conninfo)
    return f"postgresql://{parts.get('user', 'postgres')}@{parts['host']}:{parts['port']}/{parts['dbname']}"


def spawn(url: str, options: dict[str, object], ledger: Path, worker_id: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(HELPER), url, str(ledger), worker_id, str(STEPS), "3", "1000"],
        stderr=subprocess.DEVNULL,
        env={**os.environ, "SAFEPOINT_TEST_STORE_OPTIONS": json.dumps(options)},
    )


def uninterrupted_answer(tmp_path: Path) -> tuple[dict[str, object], list[str]]:
    """One run through the same handler, with nothing in its way: its state and messages."""
    url = f"sqlite:///{tmp_path / 'reference.db'}"
    with safepoint.open_store(url) as store:
        store.save(Checkpoint(run_id="reference"))
        store.enqueue("reference")
    spawn(url, {}, tmp_path / "reference.tsv", "ref").wait(timeout=60)
    with safepoint.open_store(url) as store:
        cp = store.load("reference")
    return cp.state, [m["content"] for m in cp.messages]


def chaos(direct: str, dbname: str, workers: list[subprocess.Popen[bytes]], progress: Path) -> Counter[str]:
    """Kill the database's backends every 300 ms; restart the server at a third and two thirds."""
    done = Counter[str]()
    restarts_due = [RUNS // 3, 2 * RUNS // 3]
    deadline = time.monotonic() + 240
    while any(w.poll() is None for w in workers) and time.monotonic() < deadline:
        time.sleep(0.3)
        finished = progress.read_text(encoding="utf-8").count("done\t") if progress.exists() else 0
        if restarts_due and finished >= restarts_due[0]:
            restarts_due.pop(0)
            restart_postgres()
            done["restarts"] += 1
            wait_for_server(direct)
            continue
        try:
            with psycopg.connect(direct, autocommit=True, connect_timeout=2) as conn:
                killed = conn.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid()",
                    (dbname,),
                ).fetchone()
            done["terminated"] += killed[0] if killed else 0
        except psycopg.OperationalError:
            pass  # the server is restarting
    return done


def torture(tmp_path: Path, url: str, options: dict[str, object], direct: str, dbname: str) -> None:
    reference_state, reference_messages = uninterrupted_answer(tmp_path)
    with safepoint.open_store(url, **options) as store:
        for i in range(RUNS):
            store.save(Checkpoint(run_id=f"run-{i:04d}"))
            store.enqueue(f"run-{i:04d}")
    ledger = tmp_path / "ledger.tsv"
    workers = [spawn(url, options, ledger, f"w{n}") for n in range(WORKERS)]
    try:
        faults = chaos(direct, dbname, workers, ledger)
        codes = [w.wait(timeout=120) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    lines = ledger.read_text(encoding="utf-8").splitlines()
    done = Counter(line.split("\t")[1] for line in lines if line.startswith("done\t"))
    with safepoint.open_store(url, **options) as store:
        statuses = Counter(info.status for info in store.runs(limit=RUNS))
        answers = [store.load(f"run-{i:04d}") for i in range(RUNS)]
    print(f"faults {dict(faults)}, statuses {dict(statuses)}, ledger {len(done)} runs, exits {codes}")
    assert faults["restarts"] == 2
    assert codes == [0] * WORKERS
    assert statuses == {Status.DONE: RUNS}
    assert len(done) == RUNS
    assert max(done.values()) == 1
    for cp in answers:
        assert cp.state == reference_state
        assert [m["content"] for m in cp.messages] == reference_messages


def test_run_in_workers_survives_terminated_backends_and_two_restarts(tmp_path: Path) -> None:
    """8 workers, 1,000 runs, backends killed every 300 ms, 2 restarts: 0 failed, 0 twice, exact answers."""
    require_cluster()
    dsn = require_postgres()
    with fresh_database(dsn) as (direct, dbname):
        torture(tmp_path, as_url(direct), {"max_size": 4}, direct, dbname)
