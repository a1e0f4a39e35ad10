"""The PostgreSQL store through a real PgBouncer in transaction mode.

At scale users put PgBouncer in front of PostgreSQL: consecutive transactions
of one client land on different server connections, so nothing may live on the
session (the schema is set per transaction, prepared statements are off for
PgBouncer 1.18). These tests save, load and claim through one from threads and
processes, keep two schemas apart on one server connection, and restart
PgBouncer under running workers. Skipped when there is no ``pgbouncer`` binary
(never under ``CI=true``; ``make test`` installs it).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

import safepoint
from conftest_postgres import fresh_schema, raw, require_postgres
from pgbouncer import PgBouncer, require_pgbouncer, started_pgbouncer
from safepoint import Checkpoint, Status, Store, StoreError
from safepoint.worker import Job
from safepoint.worker.fair import FairClaims

pytestmark = pytest.mark.timeout(120)
# PgBouncer 1.18 (Debian 12) cannot keep prepared statements apart in transaction mode.
BOUNCER_OPTIONS = {"prepare_threshold": None}


@pytest.fixture(scope="module")
def bouncer() -> Iterator[PgBouncer]:
    """One PgBouncer in transaction mode for the module, in front of the test server."""
    require_pgbouncer()
    with started_pgbouncer(require_postgres(), pool_size=4) as running:
        yield running


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema(require_postgres()) as name:
        yield name


def open_through(bouncer: PgBouncer, schema: str, **options: object) -> Store:
    return safepoint.open_store(bouncer.dsn, schema=schema, **BOUNCER_OPTIONS, **options)


def to_step_two(job: Job) -> Status:
    """A short run to step 2, resumed from its latest checkpoint, each step saved under the lease."""
    cp = job.checkpoint
    while cp.step < 2:
        cp = cp.next()
        cp.messages.append({"role": "assistant", "content": f"step {cp.step} of {job.run_id}"})
        cp.counters["steps"] = cp.step
        job.save(cp)
    return Status.DONE


def queue_runs(store: Store, count: int, prefix: str) -> list[str]:
    run_ids = [f"{prefix}-{index}" for index in range(count)]
    for run_id in run_ids:
        cp = Checkpoint(run_id=run_id)
        cp.messages.append({"role": "user", "content": run_id})
        store.save(cp)
        store.enqueue(run_id)
    return run_ids


def test_threads_save_load_and_claim(bouncer: PgBouncer, schema: str) -> None:
    """8 threads save and load 5 steps of their own runs, then claim 40 queued runs: each claimed once."""
    store = open_through(bouncer, schema, max_size=8)
    try:

        def steps(thread: int) -> int:
            cp = Checkpoint(run_id=f"thread-{thread}")
            for step in range(5):
                if step:
                    cp = store.load(cp.run_id).next()
                cp.messages.append({"role": "user", "content": f"{thread}/{step}"})
                store.save(cp)
            return store.load(cp.run_id).step

        with ThreadPoolExecutor(8) as pool:
            assert list(pool.map(steps, range(8))) == [4] * 8
        loaded = store.load("thread-3")
        assert [m["content"] for m in loaded.messages] == [f"3/{step}" for step in range(5)]

        queued = queue_runs(store, 40, "claim")

        def claim_all(thread: int) -> list[str]:
            taken: list[str] = []
            while (lease := store.claim(f"w{thread}", lease=60)) is not None:
                taken.append(lease.run_id)
                store.release(lease, status=Status.DONE)
            return taken

        with ThreadPoolExecutor(8) as pool:
            claims = Counter(run_id for taken in pool.map(claim_all, range(8)) for run_id in taken)
        print(f"claims: {sum(claims.values())} of {len(queued)} runs, most per run {max(claims.values())}")
        assert sorted(claims) == sorted(queued)
        assert set(claims.values()) == {1}
    finally:
        store.close()


CHILD = """
import json, signal, sys
import safepoint
from safepoint import Status

dsn, schema, name = sys.argv[1:4]
store = safepoint.open_store(dsn, schema=schema, prepare_threshold=None, max_size=2)
handled = []

def handler(job):
    cp = job.checkpoint
    for _ in range(2):
        cp = cp.next()
        cp.messages.append({"role": "assistant", "content": f"step {cp.step} by {name}"})
        job.save(cp)
    handled.append(job.run_id)
    return Status.DONE

worker = safepoint.Worker(store, handler, worker_id=name, lease=60, poll=0.05)
worker.install_signal_handlers()  # the test sends SIGTERM once every run is done
worker.run()
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one while exiting must not kill it
store.close()
print(json.dumps(handled))
"""


def wait_until_done(store: Store, run_ids: list[str], timeout: float = 90) -> None:
    """Until every run is ``done`` (or ``timeout``; the test's assertions then say what is missing)."""
    deadline = time.monotonic() + timeout
    pending = list(run_ids)
    while pending and time.monotonic() < deadline:
        # A connection PgBouncer's restart dropped fails once; the next try gets a fresh one.
        with contextlib.suppress(StoreError):
            pending = [run_id for run_id in pending if store.run(run_id).status != Status.DONE]
        time.sleep(0.1)


def test_processes_share_the_queue(bouncer: PgBouncer, schema: str) -> None:
    """3 worker processes drain 60 queued runs through PgBouncer: every run done once, at step 2."""
    store = open_through(bouncer, schema)
    try:
        queued = queue_runs(store, 60, "proc")
        children = [
            subprocess.Popen(
                [sys.executable, "-c", CHILD, bouncer.dsn, schema, f"proc-worker-{index}"],
                stdout=subprocess.PIPE,
            )
            for index in range(3)
        ]
        # Stopped by the test once every run is done: draining with stop_when_idle may
        # sleep out the lease of a run another worker is just finishing.
        wait_until_done(store, queued)
        for child in children:
            child.send_signal(signal.SIGTERM)
        outputs = [child.communicate(timeout=60)[0] for child in children]
        assert [child.returncode for child in children] == [0, 0, 0]
        handled = Counter(run_id for out in outputs for run_id in json.loads(out))
        print(f"per worker: {[len(json.loads(out)) for out in outputs]}")
        assert sorted(handled) == sorted(queued)
        assert set(handled.values()) == {1}
        for run_id in queued:
            info = store.run(run_id)
            assert (info.status, info.head_step) == (Status.DONE, 2)
    finally:
        store.close()


# Alone, after the parallel suite: in two of three full runs beside the rest of the suite a save
# through this one-connection pool waited past the timeout (root cause not yet found; alone it
# passes in under 2 s).
def test_tenants_stay_apart_through_transaction_pooling(bouncer: PgBouncer, schema: str) -> None:
    """Two tenants of one schema through PgBouncer in transaction mode: interleaved saves of one
    run id, and each tenant's queue claimed, heartbeated and released (each call BEGIN, the
    tenant's setting, the call and COMMIT in one flush) — each tenant sees only its own, and
    nothing is left on the server's sessions."""
    store = open_through(bouncer, schema, max_size=4)
    tenants = {"a": store.for_tenant("a"), "b": store.for_tenant("b")}
    try:
        for step in range(3):
            for label, handle in tenants.items():
                cp = Checkpoint(run_id="same-id") if step == 0 else handle.load("same-id").next()
                cp.messages.append({"role": "user", "content": f"{label} {step}"})
                handle.save(cp)
        for label, handle in tenants.items():
            assert [m["content"] for m in handle.load("same-id").messages] == [
                f"{label} {n}" for n in range(3)
            ]
            queue_runs(handle, 3, label)
        fair = FairClaims(store, ["a", "b"])
        claimed = []
        while (taken := fair.claim("w", lease=60)) is not None:
            handle, lease = taken
            lease = handle.heartbeat(lease)
            handle.release(lease, status=Status.DONE)
            claimed.append((handle.tenant, lease.run_id))
        assert sorted(claimed) == sorted((t, f"{t}-{n}") for t in ("a", "b") for n in range(3))
        with psycopg.connect(bouncer.dsn, prepare_threshold=None, autocommit=True) as conn:
            row = conn.execute("SELECT current_setting('safepoint.tenant', true)").fetchone()
        assert row in ((None,), ("",))  # set per transaction, never on the session
    finally:
        store.close()


@pytest.mark.pg_restart
def test_schemas_stay_apart_on_one_server_connection(schema: str) -> None:
    """Two schemas through one server connection: each store sees its own rows; the session keeps its path."""
    require_pgbouncer()
    dsn = require_postgres()
    with fresh_schema(dsn) as other, started_pgbouncer(dsn, pool_size=1) as single:
        first, second = open_through(single, schema), open_through(single, other)
        try:
            for step in range(4):  # interleaved, so the one server connection alternates schemas
                for store, label in ((first, "first"), (second, "second")):
                    cp = Checkpoint(run_id="same-id") if step == 0 else store.load("same-id").next()
                    cp.state["owner"] = label
                    cp.messages.append({"role": "user", "content": f"{label} {step}"})
                    store.save(cp)
            for store, label in ((first, "first"), (second, "second")):
                cp = store.load("same-id")
                assert cp.step == 3
                assert cp.state["owner"] == label
                assert [m["content"] for m in cp.messages] == [f"{label} {step}" for step in range(4)]
            # The one server connection behind the pool kept its session's search_path:
            # the stores set theirs per transaction, never on the session.
            with psycopg.connect(single.dsn, prepare_threshold=None, autocommit=True) as conn:
                row = conn.execute("SELECT current_setting('search_path')").fetchone()
            assert row == ('"$user", public',)
        finally:
            first.close()
            second.close()
        for name in (schema, other):
            assert raw(dsn, name, "SELECT count(*) FROM safepoint_runs") == [(1,)]


def test_workers_survive_a_pgbouncer_restart(schema: str) -> None:
    """4 worker threads over 40 runs while PgBouncer restarts twice: every run done, each step saved once."""
    require_pgbouncer()
    with started_pgbouncer(require_postgres(), pool_size=4) as own:
        store = open_through(own, schema, max_size=4, timeout=5)
        try:
            queued = queue_runs(store, 40, "restart")
            handled: list[str] = []
            lock = threading.Lock()

            def slow_steps(job: Job) -> Status:
                time.sleep(0.02)
                outcome = to_step_two(job)
                with lock:
                    handled.append(job.run_id)
                return outcome

            workers = [
                # A claim whose commit a restart cut off leaves the run leased to no one who
                # knows it until the lease expires: a short lease keeps that wait short.
                safepoint.Worker(store, slow_steps, worker_id=f"t{index}", lease=10, poll=0.05)
                for index in range(4)
            ]
            threads = [threading.Thread(target=worker.run) for worker in workers]
            for thread in threads:
                thread.start()
            restarts = 0
            for threshold in (8, 20):
                while len(handled) < threshold and any(thread.is_alive() for thread in threads):
                    time.sleep(0.01)
                own.restart()
                restarts += 1
            wait_until_done(store, queued)
            for worker in workers:
                worker.stop()
            for thread in threads:
                thread.join(timeout=60)
            assert not any(thread.is_alive() for thread in threads)
            print(f"restarts: {restarts}, handled: {len(handled)}")
            # Each step saved once, in order, whoever finished the run.
            leftovers = [run_id for run_id in queued if store.run(run_id).status != Status.DONE]
            assert leftovers == []
            for run_id in queued:
                assert store.run(run_id).head_step == 2
                assert [m["content"] for m in store.load(run_id).messages][1:] == [
                    f"step {step} of {run_id}" for step in (1, 2)
                ]
        finally:
            store.close()
