"""The one retry-and-check policy (``safepoint.retrying``), for ``Run`` and ``AsyncRun`` alike.

A save whose commit was in doubt — the connection died after the server may
have committed — is checked against the stored digest before it is written
again: it lands exactly once. A real server cannot be made to drop a
connection at exactly that instant, so these tests inject the fault around
a real save on a real SQLite file (the write really happens, or really does
not, and only the report of it is lost). The last test drives ``AsyncRun``
under a lease through real terminated PostgreSQL backends.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

import safepoint
from conftest_postgres import require_postgres
from safepoint import AsyncStore, Checkpoint, Conflict, Lease, Status, Store
from safepoint.errors import StoreUnavailable
from safepoint.harness import AsyncRun, Run
from safepoint.records import CheckpointInfo
from worker_databases import as_url, fresh_database


def lost_reply(digest: bytes) -> StoreUnavailable:
    """What a driver raises when the connection died while its commit was on the way."""
    return StoreUnavailable("connection lost while committing", committing=True, digest=digest)


def in_doubt(save: Callable[..., CheckpointInfo], *, lands: bool) -> Callable[..., CheckpointInfo]:
    """``save`` whose first call loses its reply: committed (``lands``) or not, the caller hears
    only ``StoreUnavailable(committing=True)``, carrying the digest of what was being written."""
    calls = [0]

    def flaky(checkpoint: Checkpoint, **kwargs: Any) -> CheckpointInfo:
        calls[0] += 1
        if calls[0] > 1:
            return save(checkpoint, **kwargs)
        if lands:
            info = save(checkpoint, **kwargs)
            raise lost_reply(bytes.fromhex(info.digest))
        raise lost_reply(b"\x00" * 32)

    return flaky


def claimed(store: Store, run_id: str) -> Lease:
    store.save(Checkpoint(run_id=run_id))
    store.enqueue(run_id)
    lease = store.claim("w1", lease=30)
    assert lease is not None
    return lease


def step_count(store: Store, run_id: str, step: int) -> int:
    return sum(1 for info in store.history(run_id) if info.step == step)


@pytest.mark.parametrize("lands", [True, False], ids=["landed", "lost"])
def test_run_under_a_lease_saves_an_in_doubt_commit_exactly_once(
    tmp_path: Path, lands: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Landed: the stored step is recognised by its digest and kept; lost: it is saved again;
    either way the policy logs which it was."""
    caplog.set_level(logging.INFO, logger="safepoint.retrying")
    with safepoint.open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        lease = claimed(store, "doubt")
        run = Run.open(store, "doubt", lease=lease)
        real_save = store.save
        store.save = in_doubt(real_save, lands=lands)  # type: ignore[method-assign]
        run.state["answer"] = 42
        run.append({"role": "assistant", "content": "one step"})
        run.commit()
        store.save = real_save  # type: ignore[method-assign]
        run.finish()
        assert step_count(store, "doubt", 1) == 1
        cp = store.load("doubt")
        assert cp.status is Status.DONE
        assert cp.state == {"answer": 42}
        assert [m["content"] for m in cp.messages] == ["one step"]
    said = "an interrupted save had landed" if lands else "an interrupted save did not land"
    assert [r.getMessage() for r in caplog.records if said in r.getMessage()] != []


def test_an_in_doubt_step_stored_by_another_writer_is_a_conflict(tmp_path: Path) -> None:
    """The step is there but its digest is not ours: nothing proves it is this save's, so Conflict."""
    from safepoint import retrying  # noqa: PLC0415  # the policy itself, as Job.save uses it

    with safepoint.open_store(f"sqlite:///{tmp_path / 'c.db'}") as store:
        store.save(Checkpoint(run_id="race"))
        ours = store.load("race").next()
        ours.state["who"] = "us"
        theirs = store.load("race").next()
        theirs.state["who"] = "them"
        real_save = store.save

        def someone_else_first(checkpoint: Checkpoint, **kwargs: Any) -> CheckpointInfo:
            store.save = real_save  # type: ignore[method-assign]
            real_save(theirs)
            raise lost_reply(b"\x01" * 32)

        store.save = someone_else_first  # type: ignore[method-assign]
        with pytest.raises(Conflict):
            retrying.save(store, ours, None)
        assert store.load("race").state == {"who": "them"}


def async_in_doubt(save: Callable[..., Awaitable[CheckpointInfo]], *, lands: bool) -> Callable[..., Any]:
    """:func:`in_doubt` for an ``AsyncStore``."""
    calls = [0]

    async def flaky(checkpoint: Checkpoint, **kwargs: Any) -> CheckpointInfo:
        calls[0] += 1
        if calls[0] > 1:
            return await save(checkpoint, **kwargs)
        if lands:
            info = await save(checkpoint, **kwargs)
            raise lost_reply(bytes.fromhex(info.digest))
        raise lost_reply(b"\x00" * 32)

    return flaky


@pytest.mark.parametrize("lands", [True, False], ids=["landed", "lost"])
def test_async_run_under_a_lease_saves_an_in_doubt_commit_exactly_once(tmp_path: Path, lands: bool) -> None:
    """``AsyncRun`` rides the same policy, awaited: one stored step either way."""

    async def scenario() -> None:
        store: AsyncStore = await safepoint.open_async_store(f"sqlite:///{tmp_path / 'a.db'}")
        try:
            await store.save(Checkpoint(run_id="doubt"))
            await store.enqueue("doubt")
            lease = await store.claim("w1", lease=30)
            assert lease is not None
            run = await AsyncRun.open(store, "doubt", lease=lease)
            real_save = store.save
            store.save = async_in_doubt(real_save, lands=lands)  # type: ignore[method-assign]
            run.state["answer"] = 42
            await run.commit()
            store.save = real_save  # type: ignore[method-assign]
            await run.finish()
            history = await store.history("doubt")
            assert sum(1 for info in history if info.step == 1) == 1
            assert (await store.load("doubt")).state == {"answer": 42}
        finally:
            await store.close()

    asyncio.run(scenario())


def test_async_run_under_a_lease_rides_out_terminated_backends() -> None:
    """``AsyncRun`` on PostgreSQL, 40 steps, its backends terminated every 300 ms: every step stored once."""
    dsn = require_postgres()
    with fresh_database(dsn) as (direct, dbname):
        url = as_url(direct)
        stop = threading.Event()
        terminated = [0]

        def chaos() -> None:
            # Backends at least 200 ms old: a fresh connection gets its first
            # statement through, as after any real outage.
            while not stop.wait(0.3):
                with psycopg.connect(direct, autocommit=True) as conn:
                    row = conn.execute(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                        " WHERE datname = %s AND pid <> pg_backend_pid()"
                        " AND backend_start < now() - interval '200 milliseconds'",
                        (dbname,),
                    ).fetchone()
                terminated[0] += row[0] if row else 0

        async def scenario() -> list[CheckpointInfo]:
            store = await safepoint.open_async_store(url)
            try:
                await store.save(Checkpoint(run_id="async-chaos"))
                await store.enqueue("async-chaos")
                lease = await store.claim("w1", lease=120)
                assert lease is not None
                killer = threading.Thread(target=chaos)
                killer.start()
                try:
                    run = await AsyncRun.open(store, "async-chaos", lease=lease)
                    for k in range(1, 41):
                        run.state["k"] = k
                        run.append({"role": "assistant", "content": f"step {k}"})
                        await run.commit()
                        await asyncio.sleep(0.05)
                    await run.finish()
                finally:
                    stop.set()
                    killer.join()
            finally:
                await store.close()
            # Read back through a fresh store: this one's pool may still hold a
            # connection the last round killed, and a call outside a lease is not
            # retried (its first use would be StoreUnavailable, as it should be).
            reader = await safepoint.open_async_store(url)
            try:
                return await reader.history("async-chaos")
            finally:
                await reader.close()

        started = time.monotonic()
        history = asyncio.run(scenario())
        print(f"terminated {terminated[0]} backends in {time.monotonic() - started:.1f}s")
        assert terminated[0] > 0
        steps = [info.step for info in history]
        assert steps == list(range(42))  # step 0, 40 steps, the finish: each once
        assert history[-1].status is Status.DONE
