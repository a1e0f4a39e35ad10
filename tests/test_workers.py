"""Workers in real processes: claims, fencing and takeovers under SIGKILL and SIGSTOP.

Each test prints the counts it checked. The backends come from the
``target`` fixture: SQLite, and PostgreSQL (skipped only when the server is
unreachable outside CI).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from safepoint import Checkpoint, Status, Store

HELPER = Path(__file__).parent / "helpers" / "torture_worker.py"
pytestmark = pytest.mark.crash


@dataclass(frozen=True)
class Target:
    """Where the workers meet: a store URL and its options."""

    url: str
    options: dict[str, str]

    def open(self) -> Store:
        return safepoint.open_store(self.url, **self.options)


def spawn_worker(
    target: Target,
    journal: Path,
    worker_id: str,
    *,
    steps: int,
    lease: float,
    delay: float = 0.0,
    naive: bool = False,
) -> subprocess.Popen[bytes]:
    extra = ["naive"] if naive else []
    return subprocess.Popen(
        [
            sys.executable,
            str(HELPER),
            target.url,
            str(journal),
            worker_id,
            str(steps),
            str(lease),
            str(delay),
            *extra,
        ],
        stderr=subprocess.DEVNULL,
        env={**os.environ, "SAFEPOINT_TEST_STORE_OPTIONS": json.dumps(target.options)},
    )


def read_journals(folder: Path) -> list[list[str]]:
    entries: list[list[str]] = []
    for path in sorted(folder.glob("journal-*.tsv")):
        for line in path.read_text(encoding="utf-8").splitlines():
            fields = line.split("\t")
            if len(fields) >= 5:  # a line cut short by SIGKILL is not an acknowledgement
                entries.append(fields)
    return entries


def queue_runs(store: Store, count: int) -> list[str]:
    run_ids = [f"run-{n:04d}" for n in range(count)]
    for run_id in run_ids:
        cp = Checkpoint(run_id=run_id)
        cp.messages.append({"role": "user", "content": f"work on {run_id}"})
        store.save(cp)
        store.enqueue(run_id)
    return run_ids


def stop_outside_a_write(worker: subprocess.Popen[bytes], target: Target) -> None:
    """SIGSTOP ``worker``; on SQLite, again until it is not stopped inside a write transaction.

    A process stopped between BEGIN IMMEDIATE and COMMIT keeps the database
    file's write lock for as long as it is stopped: SQLite has no server to
    end its transaction, so no other process could write at all (a
    documented limit of the embedded store). PostgreSQL times such a
    transaction out, so there one stop is taken as it falls.
    """
    for _ in range(50):
        worker.send_signal(signal.SIGSTOP)
        if not target.url.startswith("sqlite:"):
            return
        probe = sqlite3.connect(target.url.removeprefix("sqlite:///"), timeout=0.2, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:  # stopped holding the write lock: let it finish and retry
            worker.send_signal(signal.SIGCONT)
            time.sleep(0.01)
        finally:
            probe.close()
    raise AssertionError("could not stop the worker outside a write transaction")


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    if request.param == "sqlite":
        yield Target(f"sqlite:///{tmp_path / 'workers.db'}", {})
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        yield Target(dsn, {"schema": schema})


def test_eight_workers_sigkilled_at_random_finish_every_run_once(target: Target, tmp_path: Path) -> None:
    """8 workers, 1,000 runs, random SIGKILLs and restarts: each run finishes once, no stale write lands."""
    runs, steps, workers, lease = 1000, 3, 8, 1.0
    rng = random.Random(int(os.environ.get("SAFEPOINT_CRASH_SEED", "0")) or time.time_ns())
    with target.open() as store:
        run_ids = queue_runs(store, runs)
        procs = {
            n: spawn_worker(target, tmp_path / f"journal-{n}-0.tsv", f"w{n}.0", steps=steps, lease=lease)
            for n in range(workers)
        }
        generation: dict[int, int] = defaultdict(int)
        kills = 0
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.05, 0.3))
            done = len(store.runs(status="done", limit=runs).items)
            if done == runs:
                break
            victim = rng.randrange(workers)
            procs[victim].send_signal(signal.SIGKILL)
            procs[victim].wait()
            kills += 1
            generation[victim] += 1
            tag = f"{victim}-{generation[victim]}"
            procs[victim] = spawn_worker(
                target, tmp_path / f"journal-{tag}.tsv", f"w{tag}", steps=steps, lease=lease
            )
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            proc.wait(timeout=60)

        acknowledged = [e for e in read_journals(tmp_path) if e[0] == "saved"]
        stored_digest = {}
        done_checkpoints = 0
        takeovers = 0
        for run_id in run_ids:
            history = store.history(run_id)
            assert [i.step for i in history] == list(range(steps + 1)), run_id
            assert [i.status for i in history].count(Status.DONE) == 1, run_id
            assert history[-1].status is Status.DONE
            done_checkpoints += 1
            writers: dict[int, str] = {}
            last_epoch = 0
            for info in history[1:]:
                cp = store.load(run_id, info.step)
                worker_id, epoch = cp.state["writer"]
                # One epoch, one owner: no two live leases ever shared an epoch.
                assert writers.setdefault(epoch, worker_id) == worker_id, (run_id, epoch)
                # Epochs never go back: no stale owner wrote after a takeover.
                assert epoch >= last_epoch, (run_id, info.step)
                takeovers += epoch > last_epoch > 0
                last_epoch = epoch
                stored_digest[(run_id, info.step)] = (info.digest, epoch, worker_id)
        for _, run_id, step, epoch, worker_id, digest in acknowledged:
            # Every save a worker saw acknowledged is in the store, exactly as acknowledged.
            assert stored_digest[(run_id, int(step))] == (digest, int(epoch), worker_id)
    print(
        f"\n{runs} runs x {steps} steps by {workers} workers: {kills} SIGKILLs, "
        f"{len(acknowledged)} acknowledged saves checked, {done_checkpoints} runs done exactly once, "
        f"{takeovers} takeovers by a higher epoch"
    )
    assert kills >= 5


def test_paused_worker_is_fenced_off_after_takeover(target: Target, tmp_path: Path) -> None:
    """A worker SIGSTOPped past its lease is taken over; after SIGCONT its next save is rejected."""
    with target.open() as store:
        queue_runs(store, 1)
        journal = tmp_path / "journal-paused.tsv"
        paused = spawn_worker(target, journal, "paused", steps=10_000, lease=0.6, delay=0.05, naive=True)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(read_journals(tmp_path)) < 3:
                time.sleep(0.05)
            stop_outside_a_write(paused, target)
            time.sleep(1.5)  # well past the 0.6 s lease: the lease is now expired
            # On PostgreSQL the stopped worker may hold the run row locked
            # mid-transaction; the server ends such a transaction after 5 s
            # idle, then the claim succeeds.
            lease = None
            deadline = time.monotonic() + 30
            while lease is None and time.monotonic() < deadline:
                lease = store.claim("taker", lease=60)
                time.sleep(0.1)
            assert lease is not None
            assert lease.epoch == 2
            cp = store.load("run-0000")
            taken_at = cp.step
            for _ in range(3):
                cp = cp.next()
                cp.state["writer"] = ["taker", lease.epoch]
                store.save(cp, lease=lease)
            paused.send_signal(signal.SIGCONT)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not any(e[0] == "lost" for e in read_journals(tmp_path)):
                time.sleep(0.05)
        finally:
            paused.send_signal(signal.SIGKILL)
            paused.wait()
        entries = read_journals(tmp_path)
        lost = [e for e in entries if e[0] == "lost"]
        assert len(lost) == 1
        assert lost[0][1:5] == ["run-0000", str(taken_at + 1), "1", "paused"]
        history = [store.load("run-0000", i.step) for i in store.history("run-0000")[1:]]
        writers = [tuple(cp.state["writer"]) for cp in history]
        assert writers[taken_at:] == [("taker", 2)] * 3
        assert all(w == ("paused", 1) for w in writers[:taken_at])
    print(f"\npaused owner wrote steps 1..{taken_at}, taker wrote 3 steps, 1 stale save rejected")
