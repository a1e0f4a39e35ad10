"""One live writer: a run opened by ``Run``/``AsyncRun`` is held, so its pending action runs once.

Real processes on real SQLite files and a real PostgreSQL schema: two
resumers race for one run with a pending non-idempotent action, round after
round, and a ledger file outside the database counts the effect; a holder
SIGKILLed on this host is taken over at once; a live holder makes the
opener wait, then raise ``RunHeld``. In-process: ``AsyncRun`` the same, a
collected ``Run`` lets go, and a ``Run`` inside a ``Worker`` takes no
second lease.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from safepoint import AsyncRun, Conflict, Job, LeaseLost, Reconcile, Run, RunHeld, Status, Worker
from safepoint.testing.conformance.query_log import QueryLog

HELPER = Path(__file__).parent / "helpers" / "exclusive_resumer.py"
ROUNDS = 20
HOLD_QUERIES = {"hold_run", "release_hold"}


@dataclass(frozen=True)
class Target:
    url: str
    options: dict[str, Any]

    def open(self) -> safepoint.Store:
        return safepoint.open_store(self.url, **self.options)

    async def open_async(self) -> safepoint.AsyncStore:
        return await safepoint.open_async_store(self.url, **self.options)

    def spawn(self, ledger: Path, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, str(HELPER), self.url, str(ledger), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "SAFEPOINT_TEST_STORE_OPTIONS": json.dumps(self.options)},
        )


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    if request.param == "sqlite":
        yield Target(f"sqlite:///{tmp_path / 'runs.db'}", {})
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        yield Target(dsn, {"schema": schema})


def interrupted(store: safepoint.Store, run_id: str, *, waiting: bool) -> None:
    """A run whose ``send`` action was saved pending and then interrupted (nobody knows if it
    happened); with ``waiting``, a resume without a hook has stopped it to wait for a decision."""

    def cut_off(key: str) -> str:
        raise KeyboardInterrupt  # an interrupt leaves the action pending, as a crash would

    with Run.start(store, run_id) as run, pytest.raises(KeyboardInterrupt):
        run.action("send", {"to": run_id}, cut_off)
    if waiting:
        with Run.resume(store, run_id) as run:
            assert run.status is Status.WAITING


def effects(ledger: Path) -> list[str]:
    return [line.split("\t")[0] for line in ledger.read_text().splitlines()] if ledger.exists() else []


def held_child(target: Target, ledger: Path, run_id: str, hold: float) -> subprocess.Popen[str]:
    child = target.spawn(ledger, "holder", "hold", run_id, str(hold))
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "held"
    return child


# -- between processes --------------------------------------------------------------------


def test_two_processes_resuming_one_run_take_its_pending_action_once(target: Target, tmp_path: Path) -> None:
    """20 rounds of two processes (Run and AsyncRun) resuming one run at the same instant: one effect each."""
    ledger = tmp_path / "ledger.tsv"
    with target.open() as store:
        rounds = [(f"round-{n}", "answer" if n % 2 else "open") for n in range(ROUNDS)]
        for run_id, kind in rounds:
            interrupted(store, run_id, waiting=kind == "answer")
        children = [target.spawn(ledger, "A", "sync"), target.spawn(ledger, "B", "async")]
        try:
            for run_id, kind in rounds:
                go_at = time.time() + 0.1  # both start at this instant, each in its own process
                for child in children:
                    assert child.stdin is not None
                    child.stdin.write(f"{run_id} {kind} {go_at}\n")
                    child.stdin.flush()
                outcomes = sorted(child.stdout.readline().strip() for child in children if child.stdout)
                assert outcomes == ["done", "late" if kind == "answer" else "idle"], (run_id, outcomes)
                assert effects(ledger).count(run_id) == 1, run_id
                assert store.load(run_id).status is Status.DONE
        finally:
            for child in children:
                assert child.stdin is not None
                child.stdin.close()
            for child in children:
                assert child.wait(timeout=60) == 0
    assert sorted(effects(ledger)) == sorted(run_id for run_id, _ in rounds)


def test_a_live_holder_is_waited_for_and_a_sigkilled_one_taken_over_at_once(
    target: Target, tmp_path: Path
) -> None:
    """A live holder on this host: the opener waits one (1 s) lease period, then RunHeld. SIGKILLed,
    not yet reaped: a resume starts at once (wait=0), though the holder's lease has minutes to run."""
    with target.open() as store:
        interrupted(store, "busy", waiting=False)
        # The holder's lease is long (a dead holder is never waited out here); its heartbeat
        # renews it every third of that, so the holder stays live while the opener waits.
        child = held_child(target, tmp_path / "ledger.tsv", "busy", 300.0)
        try:
            with pytest.raises(RunHeld) as caught:
                Run.open(store, "busy", hold=1.0)  # waits one lease period by default
            with pytest.raises(RunHeld):
                Run.resume_with(store, "busy", "an answer", wait=0)
            child.send_signal(signal.SIGKILL)
            # Dead but not reaped (WNOWAIT): a zombie, which runs no more code, as right after a crash.
            os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
            with Run.open(store, "busy", wait=0, reconcile={"send": Reconcile.skip("sent")}) as run:
                assert run.active
                run.action("send", {"to": "busy"}, lambda key: pytest.fail("skipped, not run"))
                run.finish()
        finally:
            child.kill()
            child.wait(timeout=60)
        held = caught.value
        assert isinstance(held, Conflict)
        assert held.run_id == "busy"
        assert held.owner is not None
        assert held.owner not in str(held)
        assert "'busy'" in str(held)
        assert "UTC" in str(held)
        assert store.load("busy").status is Status.DONE
        assert store.queue_state("busy").owner is None  # done: let go at the commit


# -- in one process ------------------------------------------------------------------------


def test_async_runs_hold_their_run_like_runs(target: Target) -> None:
    """AsyncRun: another task waits, then RunHeld; async with, close and collection let go."""

    async def scenario() -> None:
        store = await target.open_async()
        async with store:
            first = await AsyncRun.start(store, "a")
            other = asyncio.create_task(AsyncRun.open(store, "a", hold=0.5))
            with pytest.raises(RunHeld):
                await other  # another task: first may be mid-turn, so it is waited for
            await first.commit()
            await first.close()
            with pytest.raises(safepoint.RunStatusError):
                await first.commit()  # closed
            async with await AsyncRun.open(store, "a", wait=0) as second:
                assert second.step == 1
                with pytest.raises(RunHeld):
                    await asyncio.create_task(AsyncRun.open(store, "a", wait=0))
            dropped = await AsyncRun.open(store, "a", wait=0)
            del dropped  # collected: its release runs on the loop
            gc.collect()
            for _ in range(500):
                if (await store.queue_state("a")).owner is None:
                    break
                await asyncio.sleep(0.01)
            assert (await store.queue_state("a")).owner is None
            waiting = await AsyncRun.open(store, "a", wait=0)
            await waiting.wait_for_input("ok?")  # a commit that leaves the run not running lets go
            assert (await store.queue_state("a")).owner is None
            answered = await AsyncRun.resume_with(store, "a", "yes", wait=0)
            assert answered.take_input() == "yes"
            await answered.close()

    asyncio.run(scenario())


def test_a_collected_run_lets_go_and_this_thread_takes_over_one_left_behind(target: Target) -> None:
    """A Run never closed: collected (by refcount or by the cyclic collector), it lets go; still
    referenced, a re-open in its thread fences it, and another thread waits for it."""
    with target.open() as store:
        Run.start(store, "r").commit()  # never closed, never kept: collected at once
        for _ in range(500):
            if store.queue_state("r").owner is None:
                break
            time.sleep(0.01)
        assert store.queue_state("r").owner is None
        left = Run.open(store, "r", wait=0)
        again = Run.open(store, "r", wait=0)  # same thread, left is idle: taken over
        with pytest.raises(LeaseLost):
            left.commit()
        again.commit()
        outcome: list[BaseException] = []

        def elsewhere() -> None:
            try:
                Run.open(store, "r", hold=0.3)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        assert [type(e) for e in outcome] == [RunHeld]  # another thread: again may be mid-turn
        again.close()
        assert [i.step for i in store.history("r")] == [0, 1, 2]
        cycle = Run.open(store, "r", wait=0)
        setattr(cycle, "itself", cycle)  # noqa: B010  # only a reference cycle keeps it alive
        del cycle
        gc.collect()  # the cyclic collector finds it: its heartbeat thread lets go
        for _ in range(500):
            if store.queue_state("r").owner is None:
                break
            time.sleep(0.01)
        assert store.queue_state("r").owner is None


def test_a_held_run_is_not_claimed_and_a_run_inside_a_worker_takes_no_second_lease(target: Target) -> None:
    """A held queued run is skipped by claim; the handler's Run uses the worker's lease (no hold
    queries), and an opener outside the handler waits for the worker, then gets RunHeld."""
    with target.open() as store, target.open() as outside:
        with Run.start(store, "job") as run:
            store.enqueue("job")
            assert store.claim("w0", lease=5) is None  # held: not claimable
            run.commit()
        assert store.queue_state("job").queued  # let go, still queued

        log = QueryLog(store)
        seen: list[Any] = []

        def handler(job: Job) -> Status:
            with Run.open(job.store, job.run_id, lease=job.lease) as run:
                try:
                    Run.open(outside, job.run_id, hold=0.3)
                except RunHeld as exc:
                    seen.append(exc)
                run.append({"role": "assistant", "content": "worked"})
                run.finish()
                seen.append(store.queue_state(job.run_id).owner)
                return run.status

        assert Worker(store, handler, worker_id="w1", lease=5).run(max_runs=1) == 1
        assert [type(seen[0]), seen[1]] == [RunHeld, "w1"]
        assert not HOLD_QUERIES & {q.name for q in log.queries}
        assert outside.load("job").status is Status.DONE
