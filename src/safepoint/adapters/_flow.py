"""Adapter logic written once, run by a blocking or an awaiting driver.

An adapter operation (a LangGraph ``put``, a session's ``add_items`` …) is a
*flow*: a generator that yields store requests (``Load``, ``Save``, …) and
receives their results. It holds no I/O of its own, so the sync and the async
methods of an adapter run the very same flow — ``Runner.run`` blocks on a
``Store``, ``Runner.arun`` awaits an ``AsyncStore`` (or a ``Store`` in a worker
thread). A ``SafepointError`` raised by a request (``Conflict`` above all) is
thrown into the flow, which may catch it and retry.

Writes to one run are serialized inside the process by striped locks (keyed
by run id), so concurrent tasks of one graph take turns instead of racing into
``Conflict``; the store's optimistic concurrency still guards against other
processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import zlib
from collections import OrderedDict
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from safepoint import (
    AsyncStore,
    Checkpoint,
    Conflict,
    InvalidArgument,
    NotFound,
    RunInfo,
    SafepointError,
    Store,
)

T = TypeVar("T")
_STRIPES = 64
MAX_ATTEMPTS = 50  # saves rebuilt after a Conflict before a flow gives up


@dataclass(frozen=True, slots=True)
class Load:
    """Load ``run_id`` (latest, or ``step``); the flow receives ``None`` when it does not exist."""

    run_id: str
    step: int | None = None


@dataclass(frozen=True, slots=True)
class Head:
    """The run's summary (``store.run``: head step, its commit time …); the flow receives ``None``
    when the run does not exist. One small query, whatever the run's length."""

    run_id: str


@dataclass(frozen=True, slots=True)
class Save:
    """Save ``checkpoint`` as the next step of its run; ``Conflict`` is thrown into the flow."""

    checkpoint: Checkpoint


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete ``run_id``; a run that is already gone is not an error."""

    run_id: str


@dataclass(frozen=True, slots=True)
class FindRuns:
    """Every run whose labels include ``labels`` (all pages); the flow receives a list of ``RunInfo``."""

    labels: dict[str, str]


Request = Load | Head | Save | Delete | FindRuns
Flow = Generator[Request, Any, T]


def _execute(store: Store, request: Request) -> Any:
    if isinstance(request, Load):
        try:
            return store.load(request.run_id, request.step)
        except NotFound:
            return None
    if isinstance(request, Head):
        try:
            return store.run(request.run_id)
        except NotFound:
            return None
    if isinstance(request, Save):
        return store.save(request.checkpoint)
    if isinstance(request, Delete):
        with contextlib.suppress(NotFound):
            store.delete_run(request.run_id)
        return None
    found: list[RunInfo] = []
    cursor: str | None = None
    while True:
        page = store.runs(labels=request.labels, limit=500, cursor=cursor)
        found.extend(page.items)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


async def _aexecute(store: AsyncStore, request: Request) -> Any:
    if isinstance(request, Load):
        try:
            return await store.load(request.run_id, request.step)
        except NotFound:
            return None
    if isinstance(request, Head):
        try:
            return await store.run(request.run_id)
        except NotFound:
            return None
    if isinstance(request, Save):
        return await store.save(request.checkpoint)
    if isinstance(request, Delete):
        with contextlib.suppress(NotFound):
            await store.delete_run(request.run_id)
        return None
    found: list[RunInfo] = []
    cursor: str | None = None
    while True:
        page = await store.runs(labels=request.labels, limit=500, cursor=cursor)
        found.extend(page.items)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


def drive(store: Store, flow: Flow[T]) -> T:
    """Run ``flow`` to its end against a blocking store."""
    result: Any = None
    error: SafepointError | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        result, error = None, None
        try:
            result = _execute(store, request)
        except SafepointError as exc:
            error = exc


async def adrive(store: AsyncStore, flow: Flow[T]) -> T:
    """Run ``flow`` to its end against an async store."""
    result: Any = None
    error: SafepointError | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        result, error = None, None
        try:
            result = await _aexecute(store, request)
        except SafepointError as exc:
            error = exc


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


class CheckpointCache:
    """The last checkpoint each run was saved or loaded at, for the incremental path.

    Saving ``cached.next()`` writes only what changed since, instead of
    re-sending the whole message history. A stale entry costs one ``Conflict``
    and a reload, never a wrong write. Each entry may carry ``extra`` data the
    adapter keeps with it (e.g. the raw messages it last handed to the store,
    which a scrubber may have stored redacted; the LangGraph saver keeps a
    ``langgraph_memo.Memo``). Bounded: least recently used goes.
    """

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._entries: OrderedDict[str, tuple[Checkpoint, Any]] = OrderedDict()
        self._guard = threading.Lock()

    def get(self, run_id: str) -> tuple[Checkpoint, Any] | None:
        with self._guard:
            entry = self._entries.get(run_id)
            if entry is not None:
                self._entries.move_to_end(run_id)
            return entry

    def put(self, cp: Checkpoint, extra: Any = None, *, replace: bool = False) -> None:
        """Remember ``cp`` unless this or a later step of its run is already known
        (with ``replace``: unless a later step is known)."""
        with self._guard:
            known = self._entries.get(cp.run_id)
            if known is not None and (known[0].step > cp.step or (known[0].step == cp.step and not replace)):
                return
            self._entries[cp.run_id] = (cp, extra)
            self._entries.move_to_end(cp.run_id)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def drop(self, run_id: str, *, only: Checkpoint | None = None) -> None:
        """Forget the run (with ``only``: only if ``only`` is still the checkpoint remembered for it)."""
        with self._guard:
            known = self._entries.get(run_id)
            if known is not None and (only is None or known[0] is only):
                del self._entries[run_id]


def thaw(value: Any) -> Any:
    """A mutable deep copy of stored JSON: loaded values are frozen and shared between steps."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value


def gave_up(run_id: str, step: int) -> Conflict:
    """The error for a flow whose save lost ``MAX_ATTEMPTS`` races in a row to other writers."""
    return Conflict(run_id, step, None, detail=f"other writers won {MAX_ATTEMPTS} attempts in a row")
