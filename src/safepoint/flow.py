"""Logic written once above the store: flows, their requests, and the two drivers.

The harness (``Run``/``AsyncRun``) and the framework adapters each hold their
logic as *flows*: generators without I/O that yield requests — one store
call each (``Load``, ``Head``, ``Save``, ``Delete``, ``FindRuns``,
``KeepLast``, ``SchemaVersion``), or a call of user code (``Invoke``) — and get each
request's result sent back. ``drive`` serves a flow by blocking on a store,
``adrive`` by awaiting an async one, so the sync and the async face of an
operation run the very same flow. (Underneath, the store's own operations
are generators too, of named SQL queries: ``safepoint.store``'s ``Query``
and ``Op``. Those are the SQL-level vocabulary; these are the calls of its
public API.)

The one rule for errors: whatever serving a request raises — an
``Exception`` or any other ``BaseException`` (``KeyboardInterrupt``,
``asyncio.CancelledError``) — is thrown back into the flow at the ``yield``
that asked for it. The flow may catch it (``Conflict`` to rebuild a save on
the new head, ``NotFound`` to start a run that does not exist yet) or let it
propagate; then it leaves ``drive`` exactly as it was raised, after the
flow's own ``except``/``finally`` blocks have run — so a flow that undoes
its in-memory changes when a save fails always gets to, and a tool's own
exception reaches the flow that called it. Requests never turn an error into
a value: a flow that takes a missing run as ``None`` says so
(``load_or_none``, ``head_or_none``).

The stores are typed by the protocols below, so this base module knows
nothing of ``safepoint.store``: a ``Store`` and an ``AsyncStore`` fit them as
they are, and so does a wrapper that serves the same calls another way (the
harness's retrying view of a leased run).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from safepoint.errors import InvalidArgument, NotFound
from safepoint.model import Checkpoint
from safepoint.records import CheckpointInfo, Page, Retention, RunInfo

T = TypeVar("T")
FIND_PAGE = 500  # runs per page when FindRuns reads a listing to its end


@dataclass(frozen=True, slots=True)
class Load:
    """``store.load``: the run's latest checkpoint, or the one at ``step``; ``NotFound`` if absent."""

    run_id: str
    step: int | None = None
    resolve_secrets: Any = False


@dataclass(frozen=True, slots=True)
class Head:
    """``store.run``: the run's summary (head step, its commit time, the row's status …);
    ``NotFound`` if absent. One small query, whatever the run's length."""

    run_id: str


@dataclass(frozen=True, slots=True)
class Save:
    """``store.save``: the checkpoint as its run's next step; the ``CheckpointInfo`` is sent back."""

    checkpoint: Checkpoint


@dataclass(frozen=True, slots=True)
class Delete:
    """``store.delete_run``; ``NotFound`` if the run is already gone."""

    run_id: str


@dataclass(frozen=True, slots=True)
class FindRuns:
    """Every run whose labels include ``labels`` (all pages of ``store.runs``), as a list of ``RunInfo``."""

    labels: dict[str, str]


@dataclass(frozen=True, slots=True)
class KeepLast:
    """``store.prune_run`` with ``Retention(keep_last=count)``: retention, the store's documented
    way of dropping a run's older checkpoints (``verify`` knows it), applied now to this run."""

    run_id: str
    count: int


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    """``store.schema_version``, the version the store writes: a new run starts at it,
    so a run started by code that declares version 3 is not stored as version 1."""


@dataclass(frozen=True, slots=True)
class Invoke:
    """Call user code (a tool, a reconcile hook): ``fn(*args)``. ``adrive`` awaits an awaitable
    result; ``drive`` refuses one (``InvalidArgument``)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]


Request = Load | Head | Save | Delete | FindRuns | KeepLast | SchemaVersion | Invoke
Flow = Generator[Request, Any, T]


class FlowStore(Protocol):
    """The store calls ``drive`` makes (``safepoint.Store`` is one)."""

    @property
    def schema_version(self) -> int: ...

    def load(self, run_id: str, step: int | None = None, *, resolve_secrets: Any = False) -> Checkpoint: ...

    def run(self, run_id: str) -> RunInfo: ...

    def save(self, checkpoint: Checkpoint) -> CheckpointInfo: ...

    def delete_run(self, run_id: str) -> None: ...

    def prune_run(self, run_id: str, policy: Retention | None = None) -> Any: ...

    def runs(
        self, *, labels: dict[str, str] | None = None, limit: int = ..., cursor: str | None = None
    ) -> Page[RunInfo]: ...


class AsyncFlowStore(Protocol):
    """The store calls ``adrive`` awaits (``safepoint.AsyncStore`` is one)."""

    @property
    def schema_version(self) -> int: ...

    async def load(
        self, run_id: str, step: int | None = None, *, resolve_secrets: Any = False
    ) -> Checkpoint: ...

    async def run(self, run_id: str) -> RunInfo: ...

    async def save(self, checkpoint: Checkpoint) -> CheckpointInfo: ...

    async def delete_run(self, run_id: str) -> None: ...

    async def prune_run(self, run_id: str, policy: Retention | None = None) -> Any: ...

    async def runs(
        self, *, labels: dict[str, str] | None = None, limit: int = ..., cursor: str | None = None
    ) -> Page[RunInfo]: ...


def drive(store: FlowStore, flow: Flow[T]) -> T:
    """Run ``flow`` to its end, serving its requests by blocking calls on ``store``."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = _serve(store, request)
        except BaseException as exc:  # thrown into the flow: the one rule above
            error = exc


async def adrive(store: AsyncFlowStore, flow: Flow[T]) -> T:
    """Run ``flow`` to its end, serving its requests by awaiting ``store``."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = await _aserve(store, request)
        except BaseException as exc:  # thrown into the flow: the one rule above
            error = exc


def _serve(store: FlowStore, request: Request) -> Any:
    if isinstance(request, Save):
        return store.save(request.checkpoint)
    if isinstance(request, Load):
        if request.resolve_secrets is False:
            return store.load(request.run_id, request.step)
        return store.load(request.run_id, request.step, resolve_secrets=request.resolve_secrets)
    if isinstance(request, Head):
        return store.run(request.run_id)
    if isinstance(request, SchemaVersion):
        return store.schema_version
    if isinstance(request, Delete):
        return store.delete_run(request.run_id)
    if isinstance(request, KeepLast):
        return store.prune_run(request.run_id, Retention(keep_last=request.count))
    if isinstance(request, FindRuns):
        found: list[RunInfo] = []
        cursor: str | None = None
        while True:
            page = store.runs(labels=request.labels, limit=FIND_PAGE, cursor=cursor)
            found.extend(page.items)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor
    result = request.fn(*request.args)
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()  # never awaited: close it instead of leaving a warning behind
        raise InvalidArgument(f"{request.fn!r} returned an awaitable: use AsyncRun for async tools and hooks")
    return result


async def _aserve(store: AsyncFlowStore, request: Request) -> Any:
    if isinstance(request, Save):
        return await store.save(request.checkpoint)
    if isinstance(request, Load):
        if request.resolve_secrets is False:
            return await store.load(request.run_id, request.step)
        return await store.load(request.run_id, request.step, resolve_secrets=request.resolve_secrets)
    if isinstance(request, Head):
        return await store.run(request.run_id)
    if isinstance(request, SchemaVersion):
        return store.schema_version
    if isinstance(request, Delete):
        return await store.delete_run(request.run_id)
    if isinstance(request, KeepLast):
        return await store.prune_run(request.run_id, Retention(keep_last=request.count))
    if isinstance(request, FindRuns):
        found: list[RunInfo] = []
        cursor: str | None = None
        while True:
            page = await store.runs(labels=request.labels, limit=FIND_PAGE, cursor=cursor)
            found.extend(page.items)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor
    result = request.fn(*request.args)
    return (await result) if inspect.isawaitable(result) else result


# -- a missing run as None, for the flows that take it so -----------------------


def load_or_none(run_id: str, step: int | None = None) -> Flow[Checkpoint | None]:
    """``Load``, with ``None`` for a run (or step) that does not exist."""
    try:
        cp: Checkpoint = yield Load(run_id, step)
    except NotFound:
        return None
    return cp


def head_or_none(run_id: str) -> Flow[RunInfo | None]:
    """``Head``, with ``None`` for a run that does not exist."""
    try:
        info: RunInfo = yield Head(run_id)
    except NotFound:
        return None
    return info


def delete_if_present(run_id: str) -> Flow[None]:
    """``Delete``; a run that is already gone is not an error."""
    try:
        yield Delete(run_id)
    except NotFound:
        return
