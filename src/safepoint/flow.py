"""Logic written once above the store: flows, their requests, and the two drivers.

The harness (``Run``/``AsyncRun``) and the framework adapters each hold their
logic as *flows*: generators without I/O that yield requests — one store
call each (``Load``, ``Head``, ``Save``, ``Delete``, ``FindRuns``,
``KeepLast``, ``SchemaVersion``), or a call of user code (``Invoke``) — and get each
request's result sent back. ``drive`` serves a flow by blocking on a store,
``adrive`` by awaiting an async one, so the sync and the async face of an
operation run the very same flow: both make each store request a call of
the store (``bound``) and run it with a loop of ``safepoint.twins``, where
``Invoke`` comes from. (Underneath, the store's own operations
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
they are.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

from safepoint.errors import NotFound
from safepoint.model import Checkpoint
from safepoint.records import CheckpointInfo, Page, Retention, RunInfo
from safepoint.twins import Invoke, awaiting, blocking, translate

__all__ = [  # Invoke too: the loops' request is a word of this vocabulary (call user code)
    "FIND_PAGE",
    "AsyncFlowStore",
    "CallIntent",
    "Delete",
    "FindRuns",
    "Flow",
    "FlowStore",
    "Head",
    "Invoke",
    "KeepLast",
    "Load",
    "RecordCall",
    "RecordedCall",
    "Request",
    "Save",
    "SchemaVersion",
    "adrive",
    "bound",
    "delete_if_present",
    "drive",
    "head_or_none",
    "load_or_none",
]

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
class RecordCall:
    """``store.record_call``: the call's result, put if absent; the stored entry is sent back
    (``Recorded``: this result when it won, an earlier writer's when one did)."""

    run_id: str
    key: str
    result: Any
    request: Any = None
    usage: Any = None
    lease: Any = None


@dataclass(frozen=True, slots=True)
class CallIntent:
    """``store.call_intent``: an intent before a call's effect, put if absent; the stored entry
    is sent back (an earlier intent or result when there was one)."""

    run_id: str
    key: str
    request: Any = None
    lease: Any = None


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """``store.recorded_call``: the journal entry under ``key``, or None."""

    run_id: str
    key: str
    request: Any = None
    resolve_secrets: Any = False


Request = (
    Load
    | Head
    | Save
    | Delete
    | FindRuns
    | KeepLast
    | SchemaVersion  # runs and checkpoints
    | RecordCall
    | CallIntent
    | RecordedCall  # the call journal
    | Invoke
)
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

    def record_call(
        self, run_id: str, key: str, result: Any, *, request: Any = ..., usage: Any = ..., lease: Any = ...
    ) -> Any: ...

    def call_intent(self, run_id: str, key: str, *, request: Any = ..., lease: Any = ...) -> Any: ...

    def recorded_call(
        self, run_id: str, key: str, *, request: Any = ..., resolve_secrets: Any = ...
    ) -> Any: ...


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

    async def record_call(
        self, run_id: str, key: str, result: Any, *, request: Any = ..., usage: Any = ..., lease: Any = ...
    ) -> Any: ...

    async def call_intent(self, run_id: str, key: str, *, request: Any = ..., lease: Any = ...) -> Any: ...

    async def recorded_call(
        self, run_id: str, key: str, *, request: Any = ..., resolve_secrets: Any = ...
    ) -> Any: ...


def drive(store: FlowStore, flow: Flow[T]) -> T:
    """Run ``flow`` to its end, serving its requests by blocking calls on ``store``."""
    return blocking(bound(store, flow))


async def adrive(store: AsyncFlowStore, flow: Flow[T]) -> T:
    """Run ``flow`` to its end, serving its requests by awaiting ``store``."""
    return await awaiting(bound(store, flow))


def bound(store: FlowStore | AsyncFlowStore, flow: Flow[T]) -> Generator[Any, Any, T]:
    """``flow`` with its store requests made calls of ``store`` (``Invoke``), for either loop of
    ``safepoint.twins``: a ``Store`` answers each call, an ``AsyncStore`` gives an awaitable."""
    return translate(flow, partial(_lower, store))


def _lower(store: Any, request: Any) -> Any:
    if isinstance(request, Save):
        return Invoke(store.save, (request.checkpoint,))
    if isinstance(request, Load):
        if request.resolve_secrets is False:
            return Invoke(store.load, (request.run_id, request.step))
        return Invoke(
            store.load, (request.run_id, request.step), {"resolve_secrets": request.resolve_secrets}
        )
    if isinstance(request, Head):
        return Invoke(store.run, (request.run_id,))
    if isinstance(request, SchemaVersion):
        return Invoke(getattr, (store, "schema_version"))
    if isinstance(request, Delete):
        return Invoke(store.delete_run, (request.run_id,))
    if isinstance(request, KeepLast):
        return Invoke(store.prune_run, (request.run_id, Retention(keep_last=request.count)))
    if isinstance(request, FindRuns):
        return _find_runs(store, request.labels)
    if isinstance(request, RecordCall):
        kwargs = {"request": request.request, "usage": request.usage, "lease": request.lease}
        return Invoke(store.record_call, (request.run_id, request.key, request.result), kwargs)
    if isinstance(request, CallIntent):
        kwargs = {"request": request.request, "lease": request.lease}
        return Invoke(store.call_intent, (request.run_id, request.key), kwargs)
    if isinstance(request, RecordedCall):
        kwargs = {"request": request.request, "resolve_secrets": request.resolve_secrets}
        return Invoke(store.recorded_call, (request.run_id, request.key), kwargs)
    return request  # the loops' own (Invoke, and what a filter above asks: Sleep …)


def _find_runs(store: Any, labels: dict[str, str]) -> Generator[Invoke, Any, list[RunInfo]]:
    found: list[RunInfo] = []
    cursor: str | None = None
    while True:
        page: Page[RunInfo] = yield Invoke(
            store.runs, (), {"labels": labels, "limit": FIND_PAGE, "cursor": cursor}
        )
        found.extend(page.items)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


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
