"""The step loop's logic, written once, without I/O.

Every ``Run``/``AsyncRun`` operation that touches the store or calls user
code is a generator here (a *flow*): it yields requests — ``Load``, ``Save``,
``Invoke`` (call a tool or a reconcile hook) — and gets their results sent
back, or their exceptions thrown in. ``run.py`` drives flows by blocking,
``asyncrun.py`` by awaiting; neither holds any of the logic below.

``RunCore`` keeps the *working* checkpoint: the next step to be saved.
After each save it carries on with ``cp.next()`` (so saves stay
incremental), keeping the same counters, cursors and state dicts, so a
caller holding ``run.state`` across a commit still holds the live one.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from safepoint.errors import BudgetExceeded, Conflict, InvalidArgument, NotFound
from safepoint.model import Checkpoint, JSONDict, Status, new_run_id
from safepoint.records import CheckpointInfo

from . import budgets
from .actions import (
    ACTION,
    INPUT,
    PendingAction,
    Reconcile,
    ReconcileHook,
    check_decision,
    default_question,
    idempotency_key,
    pending_kind,
)
from .errors import ActionMismatch, RunStatusError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Load:
    """Load the run's latest checkpoint (``NotFound`` is thrown back in if absent)."""

    run_id: str
    resolve_secrets: Any


@dataclass(frozen=True, slots=True)
class Save:
    """Save the checkpoint as the run's next step; the ``CheckpointInfo`` is sent back."""

    checkpoint: Checkpoint


@dataclass(frozen=True, slots=True)
class Invoke:
    """Call user code (a tool, a reconcile hook); an awaitable result is awaited by async drivers."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class RunStatus:
    """The run row's status; the ``Status`` is sent back.

    Asked after loading a head that says ``running``: a worker quarantines a
    poison run by its run row alone (the head may be unloadable, so no final
    checkpoint can be written), and the row's ``failed`` must win.
    """

    run_id: str


@dataclass(frozen=True, slots=True)
class CurrentVersion:
    """The ``schema_version`` the store writes (``Store.schema_version``): a new run starts at it,
    so a run started by code that declares version 3 is not stored as version 1."""


Request = Load | Save | Invoke | RunStatus | CurrentVersion
Flow = Generator[Request, Any, T]


@dataclass(frozen=True, slots=True)
class NewRun:
    """What a run starts with when ``open``/``start`` creates it."""

    run_id: str | None = None
    budget: budgets.Budget | None = None
    labels: dict[str, str] | None = None
    state: JSONDict | None = None
    cursors: JSONDict | None = None
    messages: list[JSONDict] | None = None


class RunCore:
    """The state of one run in this process, and every operation on it as a flow."""

    def __init__(self, reconcile: Mapping[str, ReconcileHook] | None = None) -> None:
        self.hooks: dict[str, ReconcileHook] = dict(reconcile or {})
        self.cp = Checkpoint()  # replaced by the first flow: started or loaded
        self.head = -1  # step of the last checkpoint saved or loaded
        self.call = 0  # index of the next action within the current step
        self.replay: tuple[PendingAction, Reconcile] | None = None

    # -- helpers --------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self.cp.run_id

    def _carry(self, saved: Checkpoint) -> None:
        """Continue from ``saved`` (just saved or loaded): the working checkpoint is its next step."""
        working = saved.next()
        working.counters, working.cursors, working.state = saved.counters, saved.cursors, saved.state
        self.head, self.cp = saved.step, working

    def _save(self) -> Flow[CheckpointInfo]:
        saving = self.cp
        info: CheckpointInfo = yield Save(saving)
        self._carry(saving)
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

    def _fail(self, exceeded: BudgetExceeded) -> Flow[None]:
        """Save the working checkpoint as failed, then raise ``exceeded``."""
        self.cp.status = Status.FAILED
        try:
            yield from self._save()
        except BaseException:
            self.cp.status = Status.RUNNING  # not saved: the run is as it was
            raise
        raise exceeded

    # -- starting and resuming ------------------------------------------------

    def start(self, new: NewRun) -> Flow[None]:
        """Create the run: save step 0 with its budget, labels, state, cursors and messages."""
        version: int = yield CurrentVersion()
        self.cp = Checkpoint(
            schema_version=version,
            run_id=new.run_id or new_run_id(),
            messages=list(new.messages or []),
            counters=budgets.starting_counters(new.budget),
            cursors=dict(new.cursors or {}),
            state=dict(new.state or {}),
            labels=dict(new.labels or {}),
        )
        yield from self._save()

    def resume(self, run_id: str, resolve_secrets: Any) -> Flow[None]:
        """Load the run's latest checkpoint and settle what it left pending."""
        cp: Checkpoint = yield Load(run_id, resolve_secrets)
        yield from self._row_status(cp)
        self._carry(cp)
        yield from self._settle()

    def _row_status(self, cp: Checkpoint) -> Flow[None]:
        """A run its row calls ``failed`` (quarantined by a worker) is failed, whatever its head says."""
        if cp.status is Status.RUNNING:
            status: Status = yield RunStatus(cp.run_id)
            if status is Status.FAILED:
                cp.status = Status.FAILED

    def open(self, new: NewRun, resolve_secrets: Any) -> Flow[None]:
        """Resume the run if it exists, else start it (``new.run_id`` is required)."""
        assert new.run_id is not None
        try:
            cp: Checkpoint = yield Load(new.run_id, resolve_secrets)
        except NotFound:
            try:
                yield from self.start(new)
                return
            except Conflict:  # another process started it first: resume theirs
                cp = yield Load(new.run_id, resolve_secrets)
        yield from self._row_status(cp)
        self._carry(cp)
        yield from self._settle()

    def resume_with(self, run_id: str, answer: Any, resolve_secrets: Any) -> Flow[None]:
        """Record a human's answer to a waiting run, save it, and resume the run."""
        cp: Checkpoint = yield Load(run_id, resolve_secrets)
        if cp.status is not Status.WAITING:
            raise RunStatusError(run_id, cp.status.value, "resume_with needs a run that is waiting")
        self._carry(cp)
        pending = self.cp.pending_action
        if pending_kind(pending) == ACTION:
            assert pending is not None
            action = PendingAction.from_json(pending)
            if not isinstance(answer, Reconcile) or answer.decision == "wait":
                raise InvalidArgument(
                    f"run {run_id!r} waits for a decision on its interrupted action {action.tool!r}: "
                    "answer with Reconcile.skip(result) or Reconcile.rerun()"
                )
            self.cp.pending_action = action.resolved(answer).to_json()
        else:
            if isinstance(answer, Reconcile):
                raise InvalidArgument(f"run {run_id!r} waits for input, not for a Reconcile decision")
            question = None if pending is None else pending.get("question")
            self.cp.pending_action = {"kind": INPUT, "question": question, "answer": answer}
        self.cp.status = Status.RUNNING
        yield from self._save()
        yield from self._settle()

    def set_budget(self, run_id: str, limits: budgets.Budget) -> Flow[None]:
        """Set the limits ``limits`` gives (the others stay) as one new checkpoint.

        A run its budget failed (failed, and over a limit) runs again once the
        new limits cover what it used; one still over them stays failed. A run
        that failed otherwise, or is done or cancelled, is refused.
        """
        cp: Checkpoint = yield Load(run_id, False)
        exceeded = budgets.over_usage(run_id, cp.counters) or budgets.at_step_limit(run_id, cp.counters)
        if cp.status in (Status.DONE, Status.CANCELLED) or (cp.status is Status.FAILED and exceeded is None):
            why = "it did not fail by its budget" if cp.status is Status.FAILED else "it is over"
            raise RunStatusError(run_id, cp.status.value, f"a new budget would not make it run: {why}")
        self._carry(cp)
        counters = self.cp.counters
        counters.update(limits.to_counters())
        if (
            cp.status is Status.FAILED
            and (budgets.over_usage(run_id, counters) or budgets.at_step_limit(run_id, counters)) is None
        ):
            self.cp.status = Status.RUNNING
        yield from self._save()

    def _settle(self) -> Flow[None]:
        """After a load: enforce the budgets, and decide about an interrupted action."""
        cp = self.cp
        if cp.status is not Status.RUNNING:
            return
        exceeded = budgets.over_usage(self.run_id, cp.counters) or budgets.at_step_limit(
            self.run_id, cp.counters
        )
        if exceeded is not None:
            yield from self._fail(exceeded)
        if pending_kind(cp.pending_action) != ACTION:
            return
        assert cp.pending_action is not None
        action = PendingAction.from_json(cp.pending_action)
        self.call = action.call
        decision = action.resolution
        if decision is None:
            hook = self.hooks.get(action.tool)
            if hook is None:
                decision = Reconcile.wait(default_question(action))
            elif isinstance(hook, Reconcile):
                decision = hook
            else:
                decision = check_decision(action.tool, (yield Invoke(hook, (action,))))
        if decision.decision == "wait":
            cp.pending_action = action.waiting(decision.question or default_question(action)).to_json()
            cp.status = Status.WAITING
            yield from self._save()
            return
        self.replay = (action, decision)

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
        if self.replay is not None:
            action, decision = self.replay
            if tool != action.tool:
                raise ActionMismatch(self.run_id, action.tool, action.step, action.call, tool)
            self.replay = None
        else:
            step = int(self.cp.counters.get("steps", 0))
            key = idempotency_key(self.run_id, step, self.call)
            action, decision = PendingAction(tool, args, key, step, self.call), Reconcile.rerun()
            self.cp.pending_action = action.to_json()
            try:
                yield from self._save()  # durable before the side effect
            except BaseException:
                self.cp.pending_action = None
                raise
        self.call += 1
        try:
            result = decision.result if decision.decision == "skip" else (yield Invoke(fn, (action.key,)))
        except Exception:
            # Failed in plain sight: the tool reported back, so the caller decides.
            # (An interrupt — KeyboardInterrupt, GeneratorExit — leaves it pending:
            # nobody knows whether the effect happened.)
            self.cp.pending_action = None
            raise
        self.cp.pending_action = None
        self.cp.counters["actions"] = int(self.cp.counters.get("actions", 0)) + 1
        return result

    def add_usage(self, tokens_in: int, tokens_out: int, spend: float) -> Flow[None]:
        """Add a model call's usage; over a limit, save the run as failed and raise."""
        self.require_active("add usage")
        budgets.add_usage(self.cp.counters, tokens_in, tokens_out, spend)
        exceeded = budgets.over_usage(self.run_id, self.cp.counters)
        if exceeded is not None:
            yield from self._fail(exceeded)

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
            info = yield from self._save()
        except BaseException:  # nothing saved: leave the step as it was, so it can be retried
            cp.counters["steps"] = int(cp.counters["steps"]) - 1
            cp.status = Status.RUNNING
            raise
        self.call = 0
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
