"""Running an adapter's flows on its store, blocking or awaiting, one writer per run at a time.

An adapter operation (a LangGraph ``put``, a session's ``add_items`` …) is a
flow (``safepoint.flow``): it holds no I/O of its own, so the sync and the
async methods of an adapter run the very same flow — ``Runner.run`` blocks on
a ``Store``, ``Runner.arun`` awaits an ``AsyncStore`` (or a ``Store`` in a
worker thread). A store error is thrown into the flow, which may catch it
(``Conflict`` above all) and rebuild its save on the new head.

Writes to one run are serialized inside the process by striped locks (keyed
by run id), so concurrent tasks of one graph take turns instead of racing into
``Conflict``; the store's optimistic concurrency still guards against other
processes.
"""

from __future__ import annotations

import asyncio
import threading
import zlib
from typing import Any, TypeVar

from safepoint import AsyncStore, InvalidArgument, Store, open_store
from safepoint.flow import Flow, adrive, drive

T = TypeVar("T")
_STRIPES = 64


def open_given(
    store: Store | AsyncStore | str, store_options: dict[str, Any] | None
) -> tuple[Store | AsyncStore, bool]:
    """The store an adapter was given — a ``Store``, an ``AsyncStore``, or a URL opened here with
    ``store_options`` — and whether the adapter owns it (it does when it opened it: its
    ``close()`` closes it)."""
    owned = isinstance(store, str)
    if store_options is not None and not owned:
        raise InvalidArgument("store_options are for a store given by URL; this store is open already")
    return (open_store(store, **(store_options or {})) if isinstance(store, str) else store), owned


def _stripe(key: str) -> int:
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % _STRIPES


class Runner:
    """Runs flows on the adapter's store, blocking (``run``) or awaiting (``arun``).

    With a ``Store``, ``arun`` runs the flow in a worker thread so the event
    loop never waits on a commit. With an ``AsyncStore``, ``run`` is only
    possible from a thread other than the event loop's (it hands the flow to
    the loop and waits); from the loop itself, use the async methods.
    """

    def __init__(self, store: Store | AsyncStore) -> None:
        if not isinstance(store, Store | AsyncStore):
            raise InvalidArgument(
                f"expected a safepoint Store or AsyncStore (safepoint.open_store(url)), "
                f"not {type(store).__name__}"
            )
        self.store = store
        self._locks = [threading.Lock() for _ in range(_STRIPES)]
        self._alocks: list[asyncio.Lock] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        if isinstance(store, AsyncStore):
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                self._loop = None  # learnt on the first async call

    def run(self, flow: Flow[T], lock: str | None = None) -> T:
        """Run ``flow`` and block until it ends (holding ``lock``'s stripe, if given)."""
        store = self.store
        if isinstance(store, Store):
            if lock is None:
                return drive(store, flow)
            with self._locks[_stripe(lock)]:
                return drive(store, flow)
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            flow.close()
            raise InvalidArgument(
                "this adapter was given an AsyncStore: call its async methods (e.g. graph.ainvoke), "
                "or give it a sync Store (safepoint.open_store) for sync calls"
            )
        return asyncio.run_coroutine_threadsafe(self.arun(flow, lock), loop).result()

    async def arun(self, flow: Flow[T], lock: str | None = None) -> T:
        """Run ``flow`` without blocking the event loop (holding ``lock``'s stripe, if given)."""
        store = self.store
        if isinstance(store, Store):
            return await asyncio.to_thread(self.run, flow, lock)
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        if lock is None:
            return await adrive(store, flow)
        if self._alocks is None:
            self._alocks = [asyncio.Lock() for _ in range(_STRIPES)]
        async with self._alocks[_stripe(lock)]:
            return await adrive(store, flow)
