"""``AsyncRun``: ``Run`` for asyncio code, on an ``AsyncStore``.

The same entries as ``Run`` (``run.Runs``), each a coroutine method that
awaits its flow (``safepoint.twins``): the same method names, awaited.
Tools and reconcile hooks may be plain functions or return awaitables
(``async def``); either works. An ``AsyncRun`` holds its run as a ``Run``
does (an asyncio task renews the lease; ``async with`` or ``await
run.close()`` lets go). Under a worker's lease, loads and saves ride out an
outage as ``Run``'s do (``safepoint.retrying``, awaited).
"""

from __future__ import annotations

from typing import ClassVar

from safepoint.store import AsyncStore
from safepoint.twins import Awaiting

from .holders import AsyncHolding
from .run import Runs


class AsyncRun(Runs[AsyncStore], Awaiting):
    """``Run`` for asyncio: ``await AsyncRun.open(store, run_id, ...)``, then
    ``await run.action(...)``, ``await run.add_usage(...)``, ``await run.commit()``.
    The in-memory edits (``append``, ``advance``, ``take_input``) are plain calls.
    ``async with await AsyncRun.open(...) as run:`` lets go of the run at the end."""

    _holds = AsyncHolding
    _flavoured: ClassVar[dict[str, str]] = {"Store | AsyncStore": "AsyncStore"}

    async def __aenter__(self) -> AsyncRun:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
