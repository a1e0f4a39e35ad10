"""``AsyncRun``: ``Run`` for asyncio code, on an ``AsyncStore``.

The same flows (``core.py``, ``lifecycle.py``) as ``Run``, driven by awaiting
(``safepoint.flow.adrive``): the same method names, awaited. Tools and
reconcile hooks may be plain functions or return awaitables (``async def``);
either works. An ``AsyncRun`` holds its run as a ``Run`` does (an asyncio
task renews the lease; ``async with`` or ``await run.close()`` lets go).
Under a worker's lease, loads and saves ride out an outage as ``Run``'s do
(``safepoint.retrying``, awaited).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from functools import partial
from typing import Any, TypeVar

from safepoint.errors import LeaseLost
from safepoint.flow import Flow, adrive
from safepoint.model import JSONDict, Status
from safepoint.records import CheckpointInfo, Lease
from safepoint.store import AsyncStore

from . import lifecycle
from .actions import ReconcileHook
from .budgets import Budget
from .core import RunCore
from .errors import RunStatusError
from .exclusive import DEFAULT_HOLD, Terms
from .holders import AsyncHolding
from .leased import held, leased
from .view import RunView

T = TypeVar("T")
R = TypeVar("R")


class AsyncRun(RunView):
    """``Run`` for asyncio: ``await AsyncRun.open(store, run_id, ...)``, then
    ``await run.action(...)``, ``await run.add_usage(...)``, ``await run.commit()``.
    The in-memory edits (``append``, ``advance``, ``take_input``) are plain calls.
    ``async with await AsyncRun.open(...) as run:`` lets go of the run at the end."""

    def __init__(
        self, store: AsyncStore, core: RunCore, *, lease: Lease | None = None, terms: Terms | None = None
    ) -> None:
        super().__init__(core)
        self._store = store
        self._closed = False
        self._holding: AsyncHolding | None = None
        if lease is not None:
            self._served: Callable[[Flow[Any]], Flow[Any]] = partial(leased, store, lease)
        else:
            self._holding = AsyncHolding(store, terms or Terms.of(DEFAULT_HOLD, None))
            self._holding.attach(self)
            self._served = partial(held, store, self._holding)

    @property
    def store(self) -> AsyncStore:
        return self._store

    async def _drive(self, flow: Flow[T]) -> T:
        served: Flow[T] = self._served(flow)
        holding = self._holding
        if self._closed:
            raise RunStatusError(self.run_id, self.status.value, "this Run was closed: open the run again")
        if holding is None:
            return await adrive(self._store, served)
        if holding.lost and holding.lease is not None:
            raise LeaseLost(self.run_id, holding.lease.epoch, "another writer holds the run now")
        holding.enter()
        try:
            return await adrive(self._store, served)
        finally:
            holding.leave()
            if self._core.cp.status is not Status.RUNNING:  # waiting, done, failed …: let others in
                await holding.release()

    async def _begin(self, flow: Flow[None]) -> None:
        """Drive an opening flow; if it fails, the hold it may have taken is let go."""
        try:
            await self._drive(flow)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Let go of the run: another writer may take it at once. Nothing is saved (commit first).
        Calling it again does nothing; the ``Run`` refuses any further step. ``with`` (``async with``)
        calls it."""
        self._closed = True
        if self._holding is not None:
            await self._holding.release()

    async def __aenter__(self) -> AsyncRun:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

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
        hold: float | timedelta = DEFAULT_HOLD,
        wait: float | timedelta | None = None,
    ) -> AsyncRun:
        """Create a new run (``Conflict`` if ``run_id`` exists), save its step 0 and hold it
        as ``open`` does."""
        run = cls(store, RunCore(reconcile), lease=lease, terms=Terms.of(hold, wait))
        new = lifecycle.NewRun(run_id, budget, labels, state, cursors, messages)
        await run._begin(lifecycle.start(run._core, new, run._holding))
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
        hold: float | timedelta = DEFAULT_HOLD,
        wait: float | timedelta | None = None,
    ) -> AsyncRun:
        """Continue the run from its latest checkpoint (``NotFound`` if there is none).

        ``resolve_secrets`` is passed to ``store.load``. An action the crash left
        pending is decided by its tool's ``reconcile`` hook (the run may stop as
        ``waiting``); a run already over budget is saved as failed and
        ``BudgetExceeded`` raised. A run that is done, waiting or failed comes
        back with ``active`` False. The run is held as ``open`` holds it.
        """
        run = cls(store, RunCore(reconcile), lease=lease, terms=Terms.of(hold, wait))
        await run._begin(lifecycle.resume(run._core, run_id, resolve_secrets, run._holding))
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
        hold: float | timedelta = DEFAULT_HOLD,
        wait: float | timedelta | None = None,
    ) -> AsyncRun:
        """Resume ``run_id`` if it exists, else start it with the given budget, labels,
        state, cursors and messages (which are ignored for an existing run: what it
        stored wins). The call to put at the top of an agent that may be restarted.

        The run is held until ``close`` (or the end of a ``with`` block), a
        commit that leaves it not running, or this object's garbage
        collection: no other writer takes it meanwhile. Its lease lasts
        ``hold`` seconds, renewed every third of that. An opener that finds
        it held waits up to ``wait`` seconds (default: ``hold``; 0: not at
        all), then raises ``RunHeld``; a holder on this host whose process
        is gone is taken over at once. With ``lease=job.lease`` (in a
        ``Worker``'s handler) the worker's lease is the one, and nothing
        more is held. See docs/harness.md, "One live writer".
        """
        run = cls(store, RunCore(reconcile), lease=lease, terms=Terms.of(hold, wait))
        new = lifecycle.NewRun(run_id, budget, labels, state, cursors, messages)
        await run._begin(lifecycle.resume_or_start(run._core, new, resolve_secrets, run._holding))
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
        hold: float | timedelta = DEFAULT_HOLD,
        wait: float | timedelta | None = None,
    ) -> AsyncRun:
        """Answer a ``waiting`` run and resume it, from any process.

        A run waiting for input gets ``answer`` (any JSON value) as its next
        input (``run.take_input()``); a run waiting on an interrupted action
        takes a ``Reconcile.skip(result)`` or ``Reconcile.rerun()``. The answer
        is saved before this returns. ``RunStatusError`` if the run is not waiting.
        The run is held as ``open`` holds it.
        """
        run = cls(store, RunCore(reconcile), lease=lease, terms=Terms.of(hold, wait))
        await run._begin(lifecycle.resume_with(run._core, run_id, answer, resolve_secrets, run._holding))
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
        hold: float | timedelta = DEFAULT_HOLD,
        wait: float | timedelta | None = None,
    ) -> AsyncRun:
        """Change a run's budget from any process: each limit given is set to that value
        (the others stay), saved as one new checkpoint, so the change is in the history.

        A run that its budget stopped (``failed``, over a limit) becomes
        ``running`` again when the new limits cover what it has used; resume it
        (or, for a worker's run, ``store.enqueue`` it). ``RunStatusError`` for
        a run that is done, cancelled, or failed for another reason. The run is
        held for the change (as ``open`` holds it) and let go: the ``Run`` comes back closed.
        """
        limits = Budget(tokens=tokens, spend=spend, steps=steps)
        run = cls(store, RunCore(), lease=lease, terms=Terms.of(hold, wait))
        async with run:  # a one-off: the Run comes back closed
            await run._drive(lifecycle.set_budget(run._core, run_id, limits, run._holding))
        return run

    async def action(self, tool: str, args: Any, fn: Callable[[str], R | Awaitable[R]]) -> R:
        """Take a side-effecting action: save it as pending (with its idempotency key),
        then call ``fn(key)`` and return its result; the pending action is cleared in
        memory and the next save records it done.

        After a resume with this action pending (it must be the run's next
        action), the reconcile decision applies: ``rerun`` calls ``fn`` with the
        same key, ``skip`` returns the recorded result without calling it.
        On ``AsyncRun``, ``fn`` may be async (its result is awaited).
        """
        return await self._drive(self._core.action(tool, args, fn))

    async def add_usage(self, *, tokens_in: int = 0, tokens_out: int = 0, spend: float = 0.0) -> None:
        """Add a model call's usage. Over the tokens or spend limit, the run is saved as
        failed and ``BudgetExceeded`` raised."""
        await self._drive(self._core.add_usage(tokens_in, tokens_out, spend))

    async def commit(self, *, status: Status = Status.RUNNING) -> CheckpointInfo:
        """Save the step as one atomic checkpoint. Committing the last step the budget
        allows while the run would go on saves it as failed and raises ``BudgetExceeded``."""
        return await self._drive(self._core.commit(Status(status)))

    async def finish(self) -> CheckpointInfo:
        """Commit the step as the run's last: status ``done``."""
        return await self._drive(self._core.commit(Status.DONE))

    async def fail(self) -> CheckpointInfo:
        """Commit the step with status ``failed`` (record why in ``state`` first)."""
        return await self._drive(self._core.commit(Status.FAILED))

    async def wait_for_input(self, question: str) -> CheckpointInfo:
        """Commit the step as ``waiting`` with ``question``; the process may exit. Continue
        later, from any process, with ``resume_with(store, run_id, answer)``."""
        return await self._drive(self._core.wait_for_input(question))
