"""The operators' store methods — cancel, revoke_lease, queue_state, delete_run, requeue, vacuum — and
the maintenance dry runs, on SQLite and PostgreSQL, sync and async; Run.set_budget on both too."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest

import safepoint
from conftest_postgres import fresh_schema, raw, require_postgres
from safepoint import (
    Budget,
    BudgetExceeded,
    Checkpoint,
    Conflict,
    LeaseLost,
    NotFound,
    Retention,
    Run,
    Status,
)
from safepoint.errors import CorruptCheckpoint, InvalidArgument, RunStatusError
from safepoint.store.sqlite.driver import SQLiteDriver


@dataclass
class Backend:
    name: str
    url: str
    corrupt: Callable[[str, int], None]  # damage (run_id, step)'s header digest, as a bad disk would

    def open(self, **options: object) -> safepoint.Store:
        return safepoint.open_store(self.url, **options)


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        path = tmp_path / "ops.db"

        def corrupt_sqlite(run_id: str, step: int) -> None:
            with closing(sqlite3.connect(path)) as conn, conn:
                (ref,) = conn.execute("SELECT id FROM safepoint_runs WHERE run_id = ?", (run_id,)).fetchone()
                conn.execute(
                    "UPDATE safepoint_checkpoints SET digest = zeroblob(32) WHERE id = ?",
                    (ref * 2**32 + step,),
                )

        yield Backend("sqlite", f"sqlite:///{path}", corrupt_sqlite)
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:

        def corrupt_postgres(run_id: str, step: int) -> None:
            raw(
                dsn,
                schema,
                "UPDATE safepoint_checkpoints SET digest = '\\x00'::bytea FROM safepoint_runs AS r"
                " WHERE r.id = run_ref AND r.run_id = %(run_id)s AND step = %(step)s",
                {"run_id": run_id, "step": step},
            )

        yield Backend("postgresql", f"{dsn}?schema={schema}", corrupt_postgres)


def _leased_run(store: safepoint.Store, run_id: str) -> tuple[Checkpoint, safepoint.Lease]:
    """A run at step 1, claimed by worker w1: (its head, the lease)."""
    cp = Checkpoint(run_id=run_id)
    cp.messages.append({"role": "user", "content": "hello"})
    store.save(cp)
    cp = cp.next()
    store.save(cp)
    store.enqueue(run_id)
    lease = store.claim("w1", lease=60)
    assert lease is not None
    assert lease.run_id == run_id
    return cp, lease


def test_cancel_fences_the_holder_and_saves_a_cancelled_step(backend: Backend) -> None:
    """cancel: the lease holder's save, heartbeat and release are LeaseLost; the history ends cancelled."""
    with backend.open() as store:
        head, lease = _leased_run(store, "job")
        done = store.cancel("job")
        assert (done.step, done.fenced) == (2, True)
        with pytest.raises(LeaseLost):
            store.save(head.next(), lease=lease)
        with pytest.raises(LeaseLost):
            store.heartbeat(lease)
        with pytest.raises(LeaseLost):
            store.release(lease, status=Status.DONE)
        assert [i.status for i in store.history("job")] == [Status.RUNNING, Status.RUNNING, Status.CANCELLED]
        cancelled = store.load("job")
        assert cancelled.messages == head.messages
        assert cancelled.counters == head.counters
        assert store.run("job").status is Status.CANCELLED
        state = store.queue_state("job")
        assert (state.queued, state.owner, state.leased()) == (False, None, False)
        assert store.claim("w2") is None  # out of the queue
        with pytest.raises(Conflict):  # a writer without a lease, from the old head
            store.save(head.next())
        assert not Run.resume(store, "job").active
        again = store.cancel("job")  # changes nothing more
        assert (again.step, again.fenced) == (None, False)
        assert len(store.history("job")) == 3


def test_cancel_refuses_a_done_run_and_cancels_an_unloadable_one(backend: Backend) -> None:
    """A done run is RunStatusError and unchanged; a corrupt head is cancelled on the run row alone."""
    with backend.open() as store:
        store.save(Checkpoint(run_id="finished", status=Status.DONE))
        with pytest.raises(RunStatusError):
            store.cancel("finished")
        assert store.run("finished").status is Status.DONE
        assert len(store.history("finished")) == 1
        with pytest.raises(NotFound):
            store.cancel("absent")
        store.save(Checkpoint(run_id="broken"))
        backend.corrupt("broken", 0)
        with pytest.raises(CorruptCheckpoint):
            store.load("broken")
        assert store.cancel("broken").step is None
        assert store.run("broken").status is Status.CANCELLED


def test_revoke_lease_fences_the_holder_and_dequeues(backend: Backend) -> None:
    """revoke_lease returns the state before (leased, queued), fences the holder; enqueue hands it back."""
    with backend.open() as store:
        head, lease = _leased_run(store, "job")
        before = store.revoke_lease("job")
        assert before.leased()
        assert before.queued
        assert before.owner == "w1"
        assert before.served_by_workers
        with pytest.raises(LeaseLost):
            store.save(head.next(), lease=lease)
        assert store.claim("w2") is None
        assert not store.queue_state("job").leased()
        store.save(head.next())  # an operator's change, no lease needed now
        store.enqueue("job")
        taken = store.claim("w2")
        assert taken is not None
        assert taken.epoch > lease.epoch
        never = Checkpoint(run_id="fresh")
        store.save(never)
        assert not store.queue_state("fresh").served_by_workers


def test_delete_run_removes_the_queue_entry_and_fences_the_holder(backend: Backend) -> None:
    """delete_run: checkpoints, run row and queue entry go; the holder is LeaseLost; blobs wait for gc."""
    with backend.open() as store:
        cp = Checkpoint(run_id="doomed", state={"report": "x" * 300_000})  # offloaded to a blob
        store.save(cp)
        store.enqueue("doomed")
        lease = store.claim("w1", lease=60)
        assert lease is not None
        store.delete_run("doomed")
        with pytest.raises(LeaseLost):
            store.save(cp.next(), lease=lease)
        with pytest.raises(LeaseLost):
            store.heartbeat(lease)
        with pytest.raises(NotFound):
            store.queue_state("doomed")
        assert store.claim("w2") is None
        assert store.collect_garbage(dry_run=True).blobs_deleted == 1  # left for gc, and gc finds it
        assert store.collect_garbage().blobs_deleted == 1


def test_async_store_has_the_operator_methods(backend: Backend) -> None:
    """AsyncStore.cancel, queue_state, revoke_lease, requeue, delete_run: the same, awaited."""

    async def scenario() -> None:
        async with await safepoint.open_async_store(backend.url) as store:
            for run_id in ("a", "b"):
                await store.save(Checkpoint(run_id=run_id))
                await store.enqueue(run_id)
            lease = await store.claim("w1", lease=60)
            assert lease is not None
            before = await store.revoke_lease(lease.run_id)
            assert before.leased()
            assert not (await store.queue_state(lease.run_id)).queued
            await store.requeue(lease.run_id)
            assert (await store.queue_state(lease.run_id)).queued
            done = await store.cancel("b")
            assert done.step == 1
            assert (await store.run("b")).status is Status.CANCELLED
            await store.delete_run("a")
            with pytest.raises(NotFound):
                await store.queue_state("a")
            if backend.name == "sqlite":
                assert (await store.vacuum()).reclaims
            else:
                with pytest.raises(InvalidArgument):
                    await store.vacuum()

    asyncio.run(scenario())


def test_dry_runs_change_nothing_and_work_read_only(backend: Backend) -> None:
    """prune_run and collect_garbage with dry_run report, change nothing, and run on a read-only store."""
    with backend.open() as store:
        cp = Checkpoint(run_id="long")
        for _ in range(4):
            cp.messages.append({"role": "user", "content": "m"})
            store.save(cp)
            cp = cp.next()
        orphan = Checkpoint(run_id="orphan", state={"blob": "y" * 300_000})
        store.save(orphan)
        store.delete_run("orphan")
    with backend.open(read_only=True) as reader:
        result = reader.prune_run("long", Retention(keep_last=1), dry_run=True)
        assert result.pruned_steps == [0, 1, 2]
        assert result.bytes_deleted > 0
        collected = reader.collect_garbage(dry_run=True)
        assert collected.blobs_deleted == 1
        assert collected.bytes_freed > 0
    with backend.open() as store:
        assert [i.step for i in store.history("long")] == [0, 1, 2, 3]
        assert store.collect_garbage(dry_run=True).blobs_deleted == 1
        pruned = store.prune_run("long", Retention(keep_last=1))
        assert pruned.pruned_steps == [0, 1, 2]
        assert pruned.bytes_deleted == result.bytes_deleted
        assert [i.step for i in store.history("long")] == [3]
        assert store.load("long").messages == cp.messages
        space = store.collect_garbage().database
        assert (space is None) == (backend.name == "postgresql")


def _fill(store: safepoint.Store, runs: int) -> None:
    for n in range(runs):
        cp = Checkpoint(run_id=f"r{n}")
        for _ in range(5):
            cp.messages.append({"role": "tool", "content": os.urandom(4000).hex()})
            store.save(cp)
            cp = cp.next()


def test_gc_gives_a_new_sqlite_file_its_space_back(tmp_path: Path) -> None:
    """A new SQLite store is incremental auto-vacuum, so after gc the file really is smaller."""
    path = tmp_path / "shrink.db"
    with safepoint.open_store(f"sqlite:///{path}") as store:
        driver = store.driver
        assert isinstance(driver, SQLiteDriver)
        assert driver.execute_raw("PRAGMA auto_vacuum") == [(2,)]
        _fill(store, 10)
    full = path.stat().st_size
    with safepoint.open_store(f"sqlite:///{path}") as store:
        for n in range(8):
            store.delete_run(f"r{n}")
        space = store.collect_garbage().database
        assert space is not None
        assert space.reclaims
        assert space.free_bytes == 0
        assert space.bytes_after < space.bytes_before / 2
    assert path.stat().st_size < full / 2  # the WAL is checkpointed as the last connection closes


def test_vacuum_shrinks_a_file_created_without_auto_vacuum(tmp_path: Path) -> None:
    """An older file keeps its free pages through gc; one vacuum() shrinks it and makes it incremental."""
    path = tmp_path / "old.db"
    with closing(sqlite3.connect(path)) as conn, conn:  # as safepoint created files before: auto_vacuum NONE
        conn.execute("PRAGMA auto_vacuum = NONE")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE unrelated (x)")
    with safepoint.open_store(f"sqlite:///{path}") as store:
        _fill(store, 6)
        for n in range(5):
            store.delete_run(f"r{n}")
        kept = store.collect_garbage().database
        assert kept is not None
        assert not kept.reclaims
        assert kept.free_bytes > 0
        assert kept.bytes_after == kept.bytes_before
        space = store.vacuum()
        assert space.reclaims
        assert space.free_bytes == 0
        assert space.bytes_after < kept.bytes_after / 2
        assert store.load("r5").step == 4  # what was kept still loads
        store.delete_run("r5")
        after = store.collect_garbage().database
        assert after is not None
        assert after.bytes_after < after.bytes_before


def test_vacuum_is_refused_on_postgresql(backend: Backend) -> None:
    """PostgreSQL's autovacuum reuses freed space: vacuum() is an InvalidArgument there."""
    with backend.open() as store:
        if backend.name == "sqlite":
            assert store.vacuum().reclaims
        else:
            with pytest.raises(InvalidArgument):
                store.vacuum()


def test_set_budget_lets_a_run_its_budget_failed_run_again(backend: Backend) -> None:
    """Run.set_budget: one new checkpoint; budget-failed becomes running once covered; else refused."""
    with backend.open() as store:
        run = Run.start(store, "spender", budget=Budget(tokens=100, steps=10))
        with pytest.raises(BudgetExceeded):
            run.add_usage(tokens_in=150)
        assert store.load("spender").status is Status.FAILED
        steps = len(store.history("spender"))
        still = Run.set_budget(store, "spender", tokens=120)  # not enough: stays failed
        assert still.status is Status.FAILED
        assert len(store.history("spender")) == steps + 1
        raised = Run.set_budget(store, "spender", tokens=1000)
        assert raised.status is Status.RUNNING
        assert raised.budget == Budget(tokens=1000, steps=10)
        resumed = Run.resume(store, "spender")
        assert resumed.active
        assert resumed.remaining.tokens == 850
        Run.start(store, "quitter").fail()
        with pytest.raises(RunStatusError):
            Run.set_budget(store, "quitter", tokens=1)
        with pytest.raises(InvalidArgument):
            Run.set_budget(store, "spender", tokens=-1)

    async def scenario() -> None:
        async with await safepoint.open_async_store(backend.url) as astore:
            run = await safepoint.AsyncRun.set_budget(astore, "spender", steps=20)
            assert run.budget.steps == 20
            assert run.status is Status.RUNNING

    asyncio.run(scenario())


def test_queue_depth_counts_what_a_claim_could_take_now(backend: Backend) -> None:
    """Queued and free: counted; leased, waiting for retry_at, or not queued: not."""
    with backend.open() as store:
        for n in range(4):
            store.save(Checkpoint(run_id=f"q-{n}"))
        store.save(Checkpoint(run_id="not-queued"))
        for n in range(4):
            store.enqueue(f"q-{n}")
        assert store.queue_depth() == 4
        lease = store.claim("w1", lease=60)
        assert lease is not None
        assert store.queue_depth() == 3  # the leased one is not claimable
        store.release(lease, requeue=True)
        assert store.queue_depth() == 4
        store.delete_run("q-0")
        assert store.queue_depth() == 3

    async def depth() -> int:
        store = await safepoint.open_async_store(backend.url)
        try:
            return await store.queue_depth()
        finally:
            await store.close()

    assert asyncio.run(depth()) == 3
