"""``Run``: the step loop of a hand-written harness, on a ``Store``.

Every method that saves or calls user code runs one flow (``core.py``,
``lifecycle.py``) by blocking on the store (``safepoint.flow.drive``);
``AsyncRun`` runs the same flows by awaiting.

Under a lease (``Run.open(job.store, job.run_id, lease=job.lease)`` in a
``Worker`` handler) loads and saves go through the workers' retry policy
(``safepoint.retrying``): an outage is ridden out, and a save whose commit was
in doubt is checked against the stored digest instead of being written twice
(``leased.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from safepoint.flow import Flow, FlowStore, drive
from safepoint.model import JSONDict, Status
from safepoint.records import CheckpointInfo, Lease
from safepoint.store import Store

from . import lifecycle
from .actions import ReconcileHook
from .budgets import Budget
from .core import RunCore
from .leased import LeasedStore
from .view import RunView

T = TypeVar("T")
R = TypeVar("R")


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

    See docs/harness.md for actions, budgets, human input and how a resumed
    run continues.
    """

    def __init__(self, store: Store, core: RunCore, *, lease: Lease | None = None) -> None:
        super().__init__(core)
        self._store = store
        self._served: FlowStore = store if lease is None else LeasedStore(store, lease)

    @property
    def store(self) -> Store:
        return self._store

    def _drive(self, flow: Flow[T]) -> T:
        return drive(self._served, flow)

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
    ) -> Run:
        """Create a new run (``Conflict`` if ``run_id`` exists) and save its step 0."""
        run = cls(store, RunCore(reconcile), lease=lease)
        run._drive(
            lifecycle.start(run._core, lifecycle.NewRun(run_id, budget, labels, state, cursors, messages))
        )
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
    ) -> Run:
        """Continue the run from its latest checkpoint (``NotFound`` if there is none).

        ``resolve_secrets`` is passed to ``store.load``. An action the crash left
        pending is decided by its tool's ``reconcile`` hook (the run may stop as
        ``waiting``); a run already over budget is saved as failed and
        ``BudgetExceeded`` raised. A run that is done, waiting or failed comes
        back with ``active`` False.
        """
        run = cls(store, RunCore(reconcile), lease=lease)
        run._drive(lifecycle.resume(run._core, run_id, resolve_secrets))
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
    ) -> Run:
        """Resume ``run_id`` if it exists, else start it with the given budget, labels,
        state, cursors and messages (which are ignored for an existing run: what it
        stored wins). The call to put at the top of an agent that may be restarted."""
        run = cls(store, RunCore(reconcile), lease=lease)
        new = lifecycle.NewRun(run_id, budget, labels, state, cursors, messages)
        run._drive(lifecycle.resume_or_start(run._core, new, resolve_secrets))
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
    ) -> Run:
        """Answer a ``waiting`` run and resume it, from any process.

        A run waiting for input gets ``answer`` (any JSON value) as its next
        input (``run.take_input()``); a run waiting on an interrupted action
        takes a ``Reconcile.skip(result)`` or ``Reconcile.rerun()``. The answer
        is saved before this returns. ``RunStatusError`` if the run is not waiting.
        """
        run = cls(store, RunCore(reconcile), lease=lease)
        run._drive(lifecycle.resume_with(run._core, run_id, answer, resolve_secrets))
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
    ) -> Run:
        """Change a run's budget from any process: each limit given is set to that value
        (the others stay), saved as one new checkpoint, so the change is in the history.

        A run that its budget stopped (``failed``, over a limit) becomes
        ``running`` again when the new limits cover what it has used; resume it
        (or, for a worker's run, ``store.enqueue`` it). ``RunStatusError`` for
        a run that is done, cancelled, or failed for another reason.
        """
        limits = Budget(tokens=tokens, spend=spend, steps=steps)  # refuses a bad limit
        run = cls(store, RunCore(), lease=lease)
        run._drive(lifecycle.set_budget(run._core, run_id, limits))
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
