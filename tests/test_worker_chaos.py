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
from collections import Counter
from pathlib import Path

import psycopg
import pytest

import safepoint
from conftest_postgres import require_postgres
from safepoint import Checkpoint, Status
from worker_databases import as_url, fresh_database, require_cluster, restart_postgres, wait_for_server

HELPER = Path(__file__).parent / "helpers" / "run_worker.py"
pytestmark = pytest.mark.pg_restart
RUNS, STEPS, WORKERS = 1000, 3, 8


def spawn(url: str, options: dict[str, object], ledger: Path, worker_id: str) -> subprocess.Popen[bytes]:
    """A worker process; its stderr goes to a file beside the ledger, so a worker that dies says why."""
    stderr = open(ledger.with_name(f"{worker_id}.stderr"), "wb")  # noqa: SIM115  # closed by the child's exit
    return subprocess.Popen(
        [sys.executable, str(HELPER), url, str(ledger), worker_id, str(STEPS), "3", "1000"],
        stderr=stderr,
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
    """Kill the database's backends every 300 ms (those older than 200 ms); restart the server
    at a third and at two thirds of the runs done."""
    done = Counter[str]()
    restarts_due = [RUNS // 3, 2 * RUNS // 3]
    deadline = time.monotonic() + 240
    finished = 0
    # Faults while there is work: once every run is done the loop stops, so the
    # idle workers can drain and exit (an idle worker claims rarely, and a
    # backend killed every 300 ms would never let its claim through).
    while finished < RUNS and any(w.poll() is None for w in workers) and time.monotonic() < deadline:
        time.sleep(0.3)
        finished = progress.read_text(encoding="utf-8").count("done\t") if progress.exists() else 0
        if restarts_due and finished >= restarts_due[0]:
            restarts_due.pop(0)
            began = time.monotonic()
            restart_postgres()
            done["restarts"] += 1
            wait_for_server(direct)
            done["restart seconds"] += round(time.monotonic() - began)
            continue
        try:
            with psycopg.connect(direct, autocommit=True, connect_timeout=2) as conn:
                # Backends at least 200 ms old: a fresh connection gets to do
                # some work before it dies, or on a slow machine every
                # connection would die before its first statement (a livelock
                # no production outage looks like).
                killed = conn.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid()"
                    " AND backend_start < now() - interval '200 milliseconds'",
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
    began = time.monotonic()
    try:
        faults = chaos(direct, dbname, workers, ledger)
        faults["work seconds"] = round(time.monotonic() - began)
        codes = [w.wait(timeout=120) for w in workers]
        faults["drain seconds"] = round(time.monotonic() - began) - faults["work seconds"]
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
    tails = {
        n: ledger.with_name(f"w{n}.stderr").read_text(encoding="utf-8", errors="replace")[-3000:]
        for n, code in enumerate(codes)
        if code != 0
    }
    assert codes == [0] * WORKERS, tails
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


def test_the_same_through_pgbouncer(tmp_path: Path) -> None:
    """The same torture with every worker connecting through PgBouncer in transaction mode."""
    require_cluster()
    from pgbouncer import running_pgbouncer  # noqa: PLC0415  # only this test needs it

    dsn = require_postgres()
    with fresh_database(dsn) as (direct, dbname), running_pgbouncer(direct) as bounced:
        torture(tmp_path, as_url(bounced), {"max_size": 4, "prepare_threshold": None}, direct, dbname)
