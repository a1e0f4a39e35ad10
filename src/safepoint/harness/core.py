"""A run's state in this process, and the flows of one step, written once without I/O.

Every ``Run``/``AsyncRun`` operation that touches the store or calls user
code is a *flow* (``safepoint.flow``): a generator that yields requests —
``Load``, ``Save``, ``Invoke`` (call a tool or a reconcile hook) … — and gets
their results sent back, or their exceptions thrown in. ``Run`` drives flows
by blocking, ``AsyncRun`` by awaiting; neither holds any of the logic. This
module holds the step's flows (``action``, ``add_usage``, ``commit``,
``wait_for_input``); how a run begins or continues is ``lifecycle.py``.

``RunCore`` keeps the *working* checkpoint: the next step to be saved.
After each save it carries on with ``cp.next()`` (so saves stay
incremental), keeping the same counters, cursors and state dicts, so a
caller holding ``run.state`` across a commit still holds the live one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from safepoint.errors import BudgetExceeded, InvalidArgument
from safepoint.flow import Flow, Invoke, Save
from safepoint.journal import Tally
from safepoint.model import Checkpoint, Status
from safepoint.reconcile import Reconcile
from safepoint.records import CheckpointInfo

from . import budgets, journaled
from .actions import (
    ACTION,
    INPUT,
    PendingAction,
    ReconcileHook,
    idempotency_key,
    pending_kind,
)
from .errors import ActionMismatch, RunStatusError


class RunCore:
    """The state of one run in this process, and the flows of one step on it."""

    def __init__(self, reconcile: Mapping[str, ReconcileHook] | None = None) -> None:
        self.hooks: dict[str, ReconcileHook] = dict(reconcile or {})
        self.cp = Checkpoint()  # replaced by the first flow: started or loaded
        self.head = -1  # step of the last checkpoint saved or loaded
        self.place = 0  # place of the step's next journaled call: actions and run.call alike
        self.replay: tuple[PendingAction, Reconcile] | None = None
        self.recorded = False  # the replay's result is the journal's: not recorded again
        self.resolve_secrets: Any = False  # as the run was loaded: how replayed results come back
        self.journal = Tally()  # what this Run's journal did in this process (run.journal)
        self.unanswered: set[str] = set()  # keys of this process's calls that raised (journaled.py)

    # -- helpers --------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self.cp.run_id

    def carry(self, saved: Checkpoint) -> None:
        """Continue from ``saved`` (just saved or loaded): the working checkpoint is its next step."""
        working = saved.next()
        working.counters, working.cursors, working.state = saved.counters, saved.cursors, saved.state
        self.head, self.cp = saved.step, working

    def save(self) -> Flow[CheckpointInfo]:
        """Save the working checkpoint, and carry on from it."""
        saving = self.cp
        info: CheckpointInfo = yield Save(saving)
        self.carry(saving)
        return info

    def require_active(self, doing: str) -> None:
        if self.cp.status is not Status.RUNNING:
            raise RunStatusError(self.run_id, self.cp.status.value, f"cannot {doing}")

    def _refuse_if_interrupted(self, doing: str) -> None:
        """An action pending in memory with nothing to replay was interrupted in this process
        (KeyboardInterrupt inside its tool): only a resume can settle it."""
        pending = self.cp.pending_action
        if self.replay is None and pending_kind(pending) == ACTION:
            assert pending is not None
            raise RunStatusError(
                self.run_id,
                "running",
                f"cannot {doing}: action {pending['tool']!r} was interrupted; resume the run to settle it",
            )

    def fail(self, exceeded: BudgetExceeded) -> Flow[None]:
        """Save the working checkpoint as failed, then raise ``exceeded``."""
        self.cp.status = Status.FAILED
        try:
            yield from self.save()
        except BaseException:
            self.cp.status = Status.RUNNING  # not saved: the run is as it was
            raise
        raise exceeded

    # -- one step ---------------------------------------------------------------

    def action(self, tool: str, args: Any, fn: Callable[[str], Any]) -> Flow[Any]:
        """Take an action: save it pending, call ``fn(key)``, clear it (see ``Run.action``)."""
        self.require_active(f"take action {tool!r}")
        if not isinstance(tool, str) or not tool:
            raise InvalidArgument(f"tool must be a non-empty str, not {tool!r}")
        if pending_kind(self.cp.pending_action) == INPUT:
            raise RunStatusError(
                self.run_id, "running", "take the human input (run.take_input()) before taking an action"
            )
        self._refuse_if_interrupted(f"take action {tool!r}")
        recorded = False
        if self.replay is not None:
            action, decision = self.replay
            if tool != action.tool:
                raise ActionMismatch(self.run_id, action.tool, action.step, action.call, tool)
            self.replay, recorded = None, self.recorded
        else:
            step = int(self.cp.counters.get("steps", 0))
            key = idempotency_key(self.run_id, step, self.place)
            action, decision = PendingAction(tool, args, key, step, self.place), Reconcile.rerun()
            self.cp.pending_action = action.to_json()
            try:
                yield from self.save()  # durable before the side effect
            except BaseException:
                self.cp.pending_action = None
                raise
        self.place += 1
        try:
            if decision.decision == "skip":
                result = decision.result
            else:
                result = yield Invoke(fn, (action.key,))
                self.journal.called += 1
        except Exception:
            # Failed in plain sight: the tool reported back, so the caller decides.
            # (An interrupt — KeyboardInterrupt, GeneratorExit — leaves it pending:
            # nobody knows whether the effect happened.)
            self.cp.pending_action = None
            raise
        if recorded:
            self.journal.replayed += 1
            self.journal.keys.append(action.key)
        else:  # until it is recorded, a crash leaves the action pending, for its hook to settle
            yield from journaled.record_action(self, action, result)
        self.cp.pending_action = None
        self.cp.counters["actions"] = int(self.cp.counters.get("actions", 0)) + 1
        return result

    def call(
        self, name: str, request: Any, fn: Callable[[Any], Any], usage: Callable[[Any], Any] | None
    ) -> Flow[Any]:
        """A call whose result the journal keeps for a resumed run (see ``Run.call``)."""
        self.require_active(f"make call {name!r}")
        self._refuse_if_interrupted(f"make call {name!r}")
        if self.replay is not None:  # the interrupted action comes first: it was the step's next call
            action = self.replay[0]
            raise ActionMismatch(self.run_id, action.tool, action.step, action.call, name, doing="called")
        return (yield from journaled.call(self, name, request, fn, usage))

    def add_usage(self, tokens_in: int, tokens_out: int, spend: float) -> Flow[None]:
        """Add a model call's usage; over a limit, save the run as failed and raise."""
        self.require_active("add usage")
        budgets.add_usage(self.cp.counters, tokens_in, tokens_out, spend)
        exceeded = budgets.over_usage(self.run_id, self.cp.counters)
        if exceeded is not None:
            yield from self.fail(exceeded)

    def commit(self, status: Status = Status.RUNNING) -> Flow[CheckpointInfo]:
        """Save the step as one checkpoint; the step-limit check may turn it into the last."""
        self.require_active("commit")
        if self.replay is not None:
            action = self.replay[0]
            raise ActionMismatch(self.run_id, action.tool, action.step, action.call, None)
        self._refuse_if_interrupted("commit")
        cp = self.cp
        cp.counters["steps"] = int(cp.counters.get("steps", 0)) + 1
        cp.status = status
        exceeded = budgets.at_step_limit(self.run_id, cp.counters) if status is Status.RUNNING else None
        if exceeded is not None:
            cp.status = Status.FAILED
        try:
            info = yield from self.save()
        except BaseException:  # nothing saved: leave the step as it was, so it can be retried
            cp.counters["steps"] = int(cp.counters["steps"]) - 1
            cp.status = Status.RUNNING
            raise
        self.place = 0
        if exceeded is not None:
            raise exceeded
        return info

    def wait_for_input(self, question: str) -> Flow[CheckpointInfo]:
        """Commit the step as ``waiting`` with ``question`` for a human."""
        self.require_active("wait for input")
        if not isinstance(question, str):
            raise InvalidArgument(f"question must be a str, not {type(question).__name__}")
        if pending_kind(self.cp.pending_action) == INPUT:
            raise RunStatusError(self.run_id, "running", "take the input it already has first")
        previous = self.cp.pending_action
        self.cp.pending_action = {"kind": INPUT, "question": question}
        try:
            return (yield from self.commit(Status.WAITING))
        except BaseException:
            self.cp.pending_action = previous
            raise
