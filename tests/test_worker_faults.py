"""Workers under everyday faults: a dropped connection, a dead worker's pending lease, SIGTERM.

``Run`` inside a ``Worker`` handler (tests/helpers/run_worker.py) is the
documented way to write a handler; these tests drive it that way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

import safepoint
from conftest_postgres import require_postgres
from safepoint import Checkpoint, Job, Status, Worker
from worker_databases import as_url, fresh_database

HELPER = Path(__file__).parent / "helpers" / "run_worker.py"
pytestmark = pytest.mark.crash


def spawn(url: str, ledger: Path, worker_id: str, steps: int, delay: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(HELPER), url, str(ledger), worker_id, str(steps), "3", "5", str(delay)],
        stderr=subprocess.DEVNULL,
    )


def test_run_in_a_worker_survives_dropped_connections(tmp_path: Path) -> None:
    """10 runs, 2 workers, every backend terminated 6 times mid-run: 0 failed, each run done once."""
    dsn = require_postgres()
    with fresh_database(dsn) as (direct, dbname):
        url = as_url(direct)
        with safepoint.open_store(url) as store:
            for i in range(10):
                store.save(Checkpoint(run_id=f"drop-{i}"))
                store.enqueue(f"drop-{i}")
        ledger = tmp_path / "ledger.tsv"
        workers = [spawn(url, ledger, f"w{n}", 5, 0.05) for n in range(2)]
        terminated = rounds = 0
        # Six rounds that each hit the workers' backends: worker processes start
        # slowly on a loaded machine, so rounds before they connect do not count.
        for _ in range(400):
            if rounds >= 6 or all(w.poll() is not None for w in workers):
                break
            time.sleep(0.25)
            with psycopg.connect(direct, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid()",
                    (dbname,),
                ).fetchone()
                hit = row[0] if row else 0
                terminated += hit
                rounds += 1 if hit else 0
        codes = [w.wait(timeout=120) for w in workers]
        done = Counter(
            line.split("\t")[1] for line in ledger.read_text().splitlines() if line.startswith("done\t")
        )
        with safepoint.open_store(url) as store:
            statuses = Counter(info.status for info in store.runs())
        print(f"terminated {terminated} backends; statuses {dict(statuses)}")
        assert terminated > 0
        assert codes == [0, 0]
        assert statuses == {Status.DONE: 10}
        assert sorted(done.values()) == [1] * 10


def test_stop_when_idle_waits_for_a_dead_workers_lease(tmp_path: Path) -> None:
    """A run leased by a worker that died is pending: a draining worker waits for the lease and does it."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'q.db'}") as store:
        store.save(Checkpoint(run_id="orphan"))
        store.enqueue("orphan")
        assert store.claim("dead-worker", lease=0.5) is not None  # and it never comes back

        def finish(job: Job) -> Status:
            nxt = job.checkpoint.next()
            nxt.status = Status.DONE
            job.save(nxt)
            return Status.DONE

        handled = Worker(store, finish, lease=2, poll=0.01).run(stop_when_idle=True)
        assert handled == 1
        assert store.run("orphan").status is Status.DONE
        # Nothing pending any more: a second draining worker returns at once.
        assert Worker(store, finish, lease=2).run(stop_when_idle=True) == 0


def test_sigterm_finishes_the_step_releases_and_exits_within_the_lease(tmp_path: Path) -> None:
    """SIGTERM mid-run: the worker exits on its own, the run is back in the queue, its attempt uncounted."""
    url = f"sqlite:///{tmp_path / 'q.db'}"
    with safepoint.open_store(url) as store:
        store.save(Checkpoint(run_id="long"))
        store.enqueue("long")
        worker = spawn(url, tmp_path / "ledger.tsv", "w", 1000, 0.05)
        while store.run("long").head_step < 2:
            time.sleep(0.02)
        os.kill(worker.pid, signal.SIGTERM)
        assert worker.wait(timeout=3) == 0  # within the 3 s lease
        info = store.run("long")
        assert info.status is Status.RUNNING
        assert info.attempts == 0
        lease = store.claim("next", lease=5)  # released, not left to expire: claimable at once
        assert lease is not None
        assert lease.attempts == 1
