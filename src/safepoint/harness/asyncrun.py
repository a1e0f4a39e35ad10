"""``AsyncRun``: ``Run`` for asyncio code, on an ``AsyncStore``.

The same flows (``core.py``) as ``Run``, driven by awaiting: the same method
names, awaited. Tools and reconcile hooks may be plain functions or return
awaitables (``async def``); either works. Under a lease, loads and saves ride
out an outage as ``Run``'s do (``safepoint.retrying``, awaited).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, TypeVar

from safepoint import retrying
from safepoint.model import JSONDict, Status
from safepoint.records import CheckpointInfo, Lease
from safepoint.store import AsyncStore

from .actions import ReconcileHook
from .budgets import Budget
from .core import CurrentVersion, Flow, Load, NewRun, Request, RunCore, RunStatus, Save
from .view import RunView

T = TypeVar("T")
R = TypeVar("R")


async def drive(store: AsyncStore, flow: Flow[T], lease: Lease | None = None) -> T:
    """Run ``flow`` to its end, serving its requests by awaiting."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = await _serve(store, request, lease)
        except Exception as exc:  # handed to the flow, which may handle it or let it propagate
            error = exc


async def _serve(store: AsyncStore, request: Request, lease: Lease | None) -> Any:
    if isinstance(request, Save):
        if lease is not None:  # a worker's run: ride out an outage, never save twice
            return await retrying.save_async(store, request.checkpoint, lease)
        return await store.save(request.checkpoint, lease=lease)
    if isinstance(request, Load):
        if request.resolve_secrets is False:
            load = partial(store.load, request.run_id)
        else:
            load = partial(store.load, request.run_id, resolve_secrets=request.resolve_secrets)
        return await (load() if lease is None else retrying.call_async("load", load, observer=store.observer))
    if isinstance(request, CurrentVersion):
        return store.schema_version
    if isinstance(request, RunStatus):
        status = partial(store.run, request.run_id)
        if lease is None:
            info = await status()
        else:
            info = await retrying.call_async("run", status, observer=store.observer)
        return info.status
    result = request.fn(*request.args)
    return (await result) if inspect.isawaitable(result) else result


class AsyncRun(RunView):
    """``Run`` for asyncio: ``await AsyncRun.open(store, run_id, ...)``, then
    ``await run.action(...)``, ``await run.add_usage(...)``, ``await run.commit()``.
    The in-memory edits (``append``, ``advance``, ``take_input``) are plain calls."""

    def __init__(self, store: AsyncStore, core: RunCore, *, lease: Lease | None = None) -> None:
        super().__init__(core)
        self._store = store
        self._lease = lease

    @property
    def store(self) -> AsyncStore:
        return self._store

    async def _drive(self, flow: Flow[T]) -> T:
        return await drive(self._store, flow, self._lease)

    @classmethod
    async def start(
        cls,
        store: AsyncStore,
        run_id: str | None = None,
        *,
        budget: Budget | None = None,
        labels: dict[str, str] | None = None,
        state: JSONDict | None = None,
        cursors: JSONDict | None = None,
        messages: list[JSONDict] | None = None,
        reconcile: Mapping[str, ReconcileHook] | None = None,
        lease: Lease | None = None,
    ) -> AsyncRun:
        """Create a new run and save its step 0 (see ``Run.start``)."""
        run = cls(store, RunCore(reconcile), lease=lease)
        await run._drive(run._core.start(NewRun(run_id, budget, labels, state, cursors, messages)))
        return run

    @classmethod
    async def resume(
        cls,
        store: AsyncStore,
        run_id: str,
        *,
        resolve_secrets: Any = False,
        reconcile: Mapping[str, ReconcileHook] | None = None,
        lease: Lease | None = None,
    ) -> AsyncRun:
        """Continue the run from its latest checkpoint (see ``Run.resume``)."""
        run = cls(store, RunCore(reconcile), lease=lease)
        await run._drive(run._core.resume(run_id, resolve_secrets))
        return run

    @classmethod
    async def open(
        cls,
        store: AsyncStore,
        run_id: str,
        *,
        budget: Budget | None = None,
        labels: dict[str, str] | None = None,
        state: JSONDict | None = None,
        cursors: JSONDict | None = None,
        messages: list[JSONDict] | None = None,
        resolve_secrets: Any = False,
        reconcile: Mapping[str, ReconcileHook] | None = None,
        lease: Lease | None = None,
    ) -> AsyncRun:
        """Resume ``run_id`` if it exists, else start it (see ``Run.open``)."""
        run = cls(store, RunCore(reconcile), lease=lease)
        new = NewRun(run_id, budget, labels, state, cursors, messages)
        await run._drive(run._core.open(new, resolve_secrets))
        return run

    @classmethod
    async def resume_with(
        cls,
        store: AsyncStore,
        run_id: str,
        answer: Any,
        *,
        resolve_secrets: Any = False,
        reconcile: Mapping[str, ReconcileHook] | None = None,
        lease: Lease | None = None,
    ) -> AsyncRun:
        """Answer a ``waiting`` run and resume it (see ``Run.resume_with``)."""
        run = cls(store, RunCore(reconcile), lease=lease)
        await run._drive(run._core.resume_with(run_id, answer, resolve_secrets))
        return run

    @classmethod
    async def set_budget(
        cls,
        store: AsyncStore,
        run_id: str,
        *,
        tokens: int | None = None,
        spend: float | None = None,
        steps: int | None = None,
        lease: Lease | None = None,
    ) -> AsyncRun:
        """Change a run's budget as one new checkpoint (see ``Run.set_budget``)."""
        limits = Budget(tokens=tokens, spend=spend, steps=steps)
        run = cls(store, RunCore(), lease=lease)
        await run._drive(run._core.set_budget(run_id, limits))
        return run

    async def action(self, tool: str, args: Any, fn: Callable[[str], R | Awaitable[R]]) -> R:
        """Take a side-effecting action (see ``Run.action``); ``fn`` may be async."""
        return await self._drive(self._core.action(tool, args, fn))

    async def add_usage(self, *, tokens_in: int = 0, tokens_out: int = 0, spend: float = 0.0) -> None:
        """Add a model call's usage (see ``Run.add_usage``)."""
        await self._drive(self._core.add_usage(tokens_in, tokens_out, spend))

    async def commit(self, *, status: Status = Status.RUNNING) -> CheckpointInfo:
        """Save the step as one atomic checkpoint (see ``Run.commit``)."""
        return await self._drive(self._core.commit(Status(status)))

    async def finish(self) -> CheckpointInfo:
        """Commit the step as the run's last: status ``done``."""
        return await self._drive(self._core.commit(Status.DONE))

    async def fail(self) -> CheckpointInfo:
        """Commit the step with status ``failed``."""
        return await self._drive(self._core.commit(Status.FAILED))

    async def wait_for_input(self, question: str) -> CheckpointInfo:
        """Commit the step as ``waiting`` with ``question`` (see ``Run.wait_for_input``)."""
        return await self._drive(self._core.wait_for_input(question))
