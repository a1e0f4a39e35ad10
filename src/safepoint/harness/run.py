"""``Run``: the step loop of a hand-written harness, on a ``Store``.

Every method that saves or calls user code runs one flow (``core.py``,
``lifecycle.py``) by blocking on the store (``safepoint.flow.drive``);
``AsyncRun`` runs the same flows by awaiting.

A ``Run`` is the run's one live writer: ``start``, ``resume``, ``open``,
``resume_with`` and ``set_budget`` hold the run's lease (``exclusive.py``,
``holders.py``) until ``close`` (or the end of a ``with`` block), a commit
that leaves the run not running, or the ``Run``'s garbage collection; every
save is made under it. A second opener waits, then gets ``RunHeld``. In a
``Worker``'s handler (``job.open_run()``) the worker's lease is the one (``leased.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from functools import partial
from typing import Any, TypeVar

from safepoint.errors import LeaseLost
from safepoint.flow import Flow, drive
from safepoint.model import Checkpoint, JSONDict, Status
from safepoint.records import CheckpointInfo, Lease
from safepoint.store import Store

from . import lifecycle
from .actions import ReconcileHook
from .budgets import Budget
from .core import RunCore
from .errors import RunStatusError
from .exclusive import DEFAULT_HOLD, Terms
from .holders import Holding
from .leased import held, leased
from .view import RunView

T = TypeVar("T")
R = TypeVar("R")
Hooks = Mapping[str, ReconcileHook] | None


class Run(RunView):
    """One agent run, step by step: start or resume it, then per step append messages,
    add usage, take actions, advance cursors, update state, and ``commit``.

        run = Run.open(store, "ticket-42", budget=Budget(tokens=200_000),
                       reconcile={"search": Reconcile.rerun()})
        while run.active:
            reply = model(run.messages)
            run.add_usage(tokens_in=reply.usage.input, tokens_out=reply.usage.output, spend=reply.cost)
            run.append(reply.message)
            ...
            run.commit()            # one atomic checkpoint
        run.close()                 # or: with Run.open(...) as run:

    The run is held while the ``Run`` is open: no other writer takes it.
    See docs/harness.md for exclusivity, actions, budgets, human input and
    how a resumed run continues.
    """

    def __init__(
        self, store: Store, core: RunCore, *, lease: Lease | None = None, terms: Terms | None = None
    ) -> None:
        super().__init__(core)
        self._store = store
        self._closed = False
        self._holding: Holding | None = None
        if lease is not None:
            self._served: Callable[[Flow[Any]], Flow[Any]] = partial(leased, store, lease)
        else:
            self._holding = Holding(store, terms or Terms.of(DEFAULT_HOLD, None))
            self._holding.attach(self)
            self._served = partial(held, store, self._holding)

    @property
    def store(self) -> Store:
        return self._store

    def _drive(self, flow: Flow[T]) -> T:
        served: Flow[T] = self._served(flow)
        holding = self._holding
        self._check_open(holding)
        if holding is None:
            return drive(self._store, served)
        holding.enter()
        try:
            return drive(self._store, served)
        finally:
            holding.leave()
            if self._core.cp.status is not Status.RUNNING:  # waiting, done, failed …: let others in
                holding.release()

    def _check_open(self, holding: Holding | None) -> None:
        if self._closed:
            raise RunStatusError(self.run_id, self.status.value, "this Run was closed: open the run again")
        if holding is not None and holding.lost and holding.lease is not None:
            raise LeaseLost(self.run_id, holding.lease.epoch, "another writer holds the run now")

    def _begin(self, flow: Flow[None]) -> None:
        """Drive an opening flow; if it fails, the hold it may have taken is let go."""
        try:
            self._drive(flow)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Let go of the run: another writer may take it at once. Nothing is saved (commit first).
        Calling it again does nothing; the ``Run`` refuses any further step. ``with`` (``async with``)
        calls it."""
        self._closed = True
        if self._holding is not None:
            self._holding.release()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- starting and resuming ------------------------------------------------

    @classmethod
    def start(
        cls,
        store: Store,
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
    ) -> Run:
        """Create a new run (``Conflict`` if ``run_id`` exists), save its step 0 and hold it
        as ``open`` does."""
        run = cls(store, RunCore(reconcile), lease=lease, terms=Terms.of(hold, wait))
        new = lifecycle.NewRun(run_id, budget, labels, state, cursors, messages)
        run._begin(lifecycle.start(run._core, new, run._holding))
        return run

    @classmethod
    def resume(
        cls,
        store: Store,
        run_id: str,
        *,
        resolve_secrets: Any = False,
        reconcile: Mapping[str, ReconcileHook] | None = None,
        lease: Lease | None = None,
        hold: float | timedelta = DEFAULT_HOLD,
        wait: float | timedelta | None = None,
    ) -> Run:
        """Continue the run from its latest checkpoint (``NotFound`` if there is none).

        ``resolve_secrets`` is passed to ``store.load``. An action the crash left
        pending is decided by its tool's ``reconcile`` hook (the run may stop as
        ``waiting``); a run already over budget is saved as failed and
        ``BudgetExceeded`` raised. A run that is done, waiting or failed comes
        back with ``active`` False. The run is held as ``open`` holds it.
        """
        run = cls(store, RunCore(reconcile), lease=lease, terms=Terms.of(hold, wait))
        run._begin(lifecycle.resume(run._core, run_id, resolve_secrets, run._holding))
        return run

    @classmethod
    def open(
        cls,
        store: Store,
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
    ) -> Run:
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
        run._begin(lifecycle.resume_or_start(run._core, new, resolve_secrets, run._holding))
        return run

    @classmethod
    def _from_loaded(cls, store: Store, lease: Lease, cp: Checkpoint | None, hooks: Hooks) -> Run:
        """``open`` under a worker's ``lease``, from ``cp``, the head it loaded (``Job.open_run``)."""
        run = cls(store, RunCore(hooks), lease=lease)
        run._begin(lifecycle.resume_loaded(run._core, lease.run_id, cp, lease.run_status))
        return run

    @classmethod
    def resume_with(
        cls,
        store: Store,
        run_id: str,
        answer: Any,
        *,
        resolve_secrets: Any = False,
        reconcile: Mapping[str, ReconcileHook] | None = None,
        lease: Lease | None = None,
        hold: float | timedelta = DEFAULT_HOLD,
        wait: float | timedelta | None = None,
    ) -> Run:
        """Answer a ``waiting`` run and resume it, from any process.

        A run waiting for input gets ``answer`` (any JSON value) as its next
        input (``run.take_input()``); a run waiting on an interrupted action
        takes a ``Reconcile.skip(result)`` or ``Reconcile.rerun()``. The answer
        is saved before this returns. ``RunStatusError`` if the run is not waiting.
        The run is held as ``open`` holds it.
        """
        run = cls(store, RunCore(reconcile), lease=lease, terms=Terms.of(hold, wait))
        run._begin(lifecycle.resume_with(run._core, run_id, answer, resolve_secrets, run._holding))
        return run

    @classmethod
    def set_budget(
        cls,
        store: Store,
        run_id: str,
        *,
        tokens: int | None = None,
        spend: float | None = None,
        steps: int | None = None,
        lease: Lease | None = None,
        hold: float | timedelta = DEFAULT_HOLD,
        wait: float | timedelta | None = None,
    ) -> Run:
        """Change a run's budget from any process: each limit given is set to that value
        (the others stay), saved as one new checkpoint, so the change is in the history.

        A run that its budget stopped (``failed``, over a limit) becomes
        ``running`` again when the new limits cover what it has used; resume it
        (or, for a worker's run, ``store.enqueue`` it). ``RunStatusError`` for
        a run that is done, cancelled, or failed for another reason. The run is
        held for the change (as ``open`` holds it) and let go: the ``Run`` comes back closed.
        """
        limits = Budget(tokens=tokens, spend=spend, steps=steps)  # refuses a bad limit
        run = cls(store, RunCore(), lease=lease, terms=Terms.of(hold, wait))
        with run:  # a one-off: the Run comes back closed
            run._drive(lifecycle.set_budget(run._core, run_id, limits, run._holding))
        return run

    # -- one step -------------------------------------------------------------

    def action(self, tool: str, args: Any, fn: Callable[[str], R]) -> R:
        """Take a side-effecting action: save it as pending (with its idempotency key),
        then call ``fn(key)`` and return its result; the pending action is cleared in
        memory and the next save records it done.

        After a resume with this action pending (it must be the run's next
        action), the reconcile decision applies: ``rerun`` calls ``fn`` with the
        same key, ``skip`` returns the recorded result without calling it.
        On ``AsyncRun``, ``fn`` may be async (its result is awaited).
        """
        return self._drive(self._core.action(tool, args, fn))  # type: ignore[no-any-return]

    def add_usage(self, *, tokens_in: int = 0, tokens_out: int = 0, spend: float = 0.0) -> None:
        """Add a model call's usage. Over the tokens or spend limit, the run is saved as
        failed and ``BudgetExceeded`` raised."""
        self._drive(self._core.add_usage(tokens_in, tokens_out, spend))

    def commit(self, *, status: Status = Status.RUNNING) -> CheckpointInfo:
        """Save the step as one atomic checkpoint. Committing the last step the budget
        allows while the run would go on saves it as failed and raises ``BudgetExceeded``."""
        return self._drive(self._core.commit(Status(status)))

    def finish(self) -> CheckpointInfo:
        """Commit the step as the run's last: status ``done``."""
        return self._drive(self._core.commit(Status.DONE))

    def fail(self) -> CheckpointInfo:
        """Commit the step with status ``failed`` (record why in ``state`` first)."""
        return self._drive(self._core.commit(Status.FAILED))

    def wait_for_input(self, question: str) -> CheckpointInfo:
        """Commit the step as ``waiting`` with ``question``; the process may exit. Continue
        later, from any process, with ``resume_with(store, run_id, answer)``."""
        return self._drive(self._core.wait_for_input(question))
