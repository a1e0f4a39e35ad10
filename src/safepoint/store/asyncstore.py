"""``AsyncStore``: the async twin of ``Store``, with the same method names.

Its methods are the call table's (``methods.py``), as ``Store``'s are, each
awaiting the same shared ``Call`` that ``Store`` blocks on (``twins.Awaiting``),
and the rest of it is ``Store``'s body too (``facade.StoreFace``), so the two
cannot drift apart: signatures, docstrings, validation, encoding, the
transaction's logic, the post-commit bookkeeping and the spans and metrics
around them (``observe.store_calls``) exist once.

SQLite has no async driver of its own; ``SQLiteAsyncDriver`` runs the sync
driver's transaction in a worker thread (``asyncio.to_thread``), which keeps
the event loop free while SQLite waits for its fsync. Saves made by many
tasks at once join (group commit, ``sqlite/transactions.py``): the saves
queued while a batch is committing go together in the next one, one
thread hop and one fsync for all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from safepoint.observe import QueryHook
from safepoint.twins import Awaiting

from .facade import StoreFace
from .query import AsyncDriver, Op
from .sqlite.driver import SQLiteDriver
from .sqlite.transactions import Member

T = TypeVar("T")


class SQLiteAsyncDriver:
    """Serves an async store from a sync SQLite driver, one transaction per thread hop."""

    def __init__(self, driver: SQLiteDriver) -> None:
        self.sync_driver = driver
        self.dialect = driver.dialect
        self.capabilities = driver.capabilities
        # Saves waiting for the batch in flight to commit (one batch at a time; see run_joined).
        self._waiting: list[Member] = []
        self._committing = False
        self._pid = os.getpid()  # a forked child starts with no batch in flight

    @property
    def on_query(self) -> QueryHook | None:
        return self.sync_driver.on_query  # the sync driver runs the statements

    @on_query.setter
    def on_query(self, hook: QueryHook | None) -> None:
        self.sync_driver.on_query = hook

    async def run(self, op: Op[T], *, write: bool) -> T:
        return await asyncio.to_thread(self.sync_driver.run, op, write=write)

    async def run_joined(self, op: Op[T], rebuild: Callable[[], Op[T]], *, weight: int) -> T:
        """The save ``op``, committed with every other task's save that queued while a batch was in flight."""
        if not self.sync_driver.group_commit:
            return await self.run(op, write=True)
        if self._pid != os.getpid():
            self._waiting, self._committing, self._pid = [], False, os.getpid()
        if not self._committing and not self._waiting:
            # Nothing in flight: this save goes alone, as with group commit off; the
            # saves that queue meanwhile go together once it is done.
            self._committing = True
            try:
                return await self.run(op, write=True)
            finally:
                self._committing = False
                if self._waiting:
                    self._commit_waiting()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def wake(member: Member) -> None:  # in the committing thread
            with contextlib.suppress(RuntimeError):  # the loop closed while the batch committed
                loop.call_soon_threadsafe(_resolve, done)

        member = Member(op, rebuild, weight, on_done=wake)
        self._waiting.append(member)
        if not self._committing:  # only after a fork reset; a batch in flight starts the next itself
            self._commit_waiting()
        # Shielded: a cancelled caller's save still commits (as a thread hop would), and the batch goes on.
        await asyncio.shield(done)
        return member.outcome()  # type: ignore[no-any-return]

    def _commit_waiting(self) -> None:
        """Hand the waiting saves to a thread as one batch; when it is done, the next batch (on the loop)."""
        batch, self._waiting = self._waiting, []
        self._committing = True
        hop = asyncio.ensure_future(asyncio.to_thread(self.sync_driver.commit_joined, batch))
        hop.add_done_callback(partial(self._committed, batch))

    def _committed(self, batch: list[Member], hop: asyncio.Future[None]) -> None:
        self._committing = False
        failure = None if hop.cancelled() else hop.exception()
        if failure is not None:  # commit_joined does not raise; should it, no task waits forever
            for member in batch:
                if not member.done:
                    member.settle(error=failure)
        if self._waiting:
            self._commit_waiting()

    async def close(self) -> None:
        await asyncio.to_thread(self.sync_driver.close)


def _resolve(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


class AsyncStore(StoreFace[AsyncDriver], Awaiting):
    """A checkpoint store for asyncio code. Open one with ``await safepoint.open_async_store(url)``.

    Every method is the ``Store`` method of the same name, awaited; see
    ``Store`` for the contracts (errors, ordering, durability).
    """

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
