"""PostgreSQL restarted under running workers: everything finishes, nothing is lost.

This restarts the shared server, so it runs on its own after the parallel
suite (``make test`` runs the ``pg_restart`` marker in a second, serial
pass); it is deselected from the parallel pass.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from safepoint import Checkpoint, Status
from worker_databases import require_cluster, restart_postgres, wait_for_server

HELPER = Path(__file__).parent / "helpers" / "torture_worker.py"
pytestmark = pytest.mark.pg_restart


def test_workers_survive_a_postgres_restart(tmp_path: Path) -> None:
    """4 workers run 200 runs while the server restarts twice: all finish, every acknowledged save is kept."""
    require_cluster()
    dsn = require_postgres()
    runs, steps = 200, 5
    with fresh_schema(dsn) as schema:
        options = {"schema": schema}
        with safepoint.open_store(dsn, **options) as store:
            for n in range(runs):
                cp = Checkpoint(run_id=f"run-{n:03d}")
                store.save(cp)
                store.enqueue(cp.run_id)
        env = {**os.environ, "SAFEPOINT_TEST_STORE_OPTIONS": json.dumps(options)}
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(HELPER),
                    dsn,
                    str(tmp_path / f"journal-{n}.tsv"),
                    f"w{n}",
                    str(steps),
                    "5",
                    "0.01",
                ],
                env=env,
                stderr=subprocess.DEVNULL,
            )
            for n in range(4)
        ]
        try:
            for _ in range(2):
                time.sleep(2.0)
                restart_postgres()
                wait_for_server(dsn)
            with safepoint.open_store(dsn, **options) as store:
                deadline = time.monotonic() + 300
                while len(store.runs(status="done", limit=runs).items) < runs:
                    assert time.monotonic() < deadline, "runs did not all finish after the restarts"
                    time.sleep(0.5)
        finally:
            for proc in workers:
                proc.send_signal(signal.SIGTERM)
            for proc in workers:
                proc.wait(timeout=60)
        acknowledged = []
        for journal in tmp_path.glob("journal-*.tsv"):
            for line in journal.read_text(encoding="utf-8").splitlines():
                fields = line.split("\t")
                if fields[0] == "saved" and len(fields) == 6:
                    acknowledged.append(fields)
        with safepoint.open_store(dsn, **options) as store:
            for n in range(runs):
                history = store.history(f"run-{n:03d}")
                assert [i.step for i in history] == list(range(steps + 1))
                assert history[-1].status is Status.DONE
            digests = {
                (f"run-{n:03d}", info.step): info.digest
                for n in range(runs)
                for info in store.history(f"run-{n:03d}")
            }
        for _, run_id, step, _epoch, _worker, digest in acknowledged:
            assert digests[(run_id, int(step))] == digest
    print(
        f"\n2 PostgreSQL restarts under 4 workers: {runs} runs done, "
        f"{len(acknowledged)} acknowledged saves kept"
    )
