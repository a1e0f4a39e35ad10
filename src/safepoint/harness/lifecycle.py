"""How a run begins or continues, as flows on a ``RunCore``: start, resume, open,
answer a waiting run, change its budget — and, after each load, settle what
the run left pending (a budget already spent, an action a crash interrupted).

Each flow takes its ``Run``'s ``holding`` (None under a worker's lease) and
holds the run (``exclusive.hold``) before it reads it: what it loads then
stays the head until it lets go. A run the flow creates is held once its
step 0 is saved (there is no run to hold before).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from safepoint.errors import Conflict, InvalidArgument, NotFound
from safepoint.flow import Flow, Head, Invoke, Load, SchemaVersion
from safepoint.model import Checkpoint, JSONDict, Status, new_run_id
from safepoint.reconcile import Reconcile
from safepoint.records import RunInfo

from . import budgets, journaled
from .actions import (
    ACTION,
    INPUT,
    PendingAction,
    check_decision,
    default_question,
    pending_kind,
)
from .core import RunCore
from .errors import RunStatusError
from .exclusive import Holding, hold


@dataclass(frozen=True, slots=True)
class NewRun:
    """What a run starts with when ``open``/``start`` creates it."""

    run_id: str | None = None
    budget: budgets.Budget | None = None
    labels: dict[str, str] | None = None
    state: JSONDict | None = None
    cursors: JSONDict | None = None
    messages: list[JSONDict] | None = None


def start(core: RunCore, new: NewRun, holding: Holding | None = None) -> Flow[None]:
    """Create the run, then hold it (see ``_hold_created``)."""
    yield from _create(core, new)
    yield from _hold_created(core, holding, False)


def _create(core: RunCore, new: NewRun) -> Flow[None]:
    """Save step 0 with its budget, labels, state, cursors and messages."""
    version: int = yield SchemaVersion()
    core.cp = Checkpoint(
        schema_version=version,
        run_id=new_run_id() if new.run_id is None else new.run_id,  # "" is a wrong id, not "no id"
        messages=list(new.messages or []),
        counters=budgets.starting_counters(new.budget),
        cursors=dict(new.cursors or {}),
        state=dict(new.state or {}),
        labels=dict(new.labels or {}),
    )
    yield from core.save()


def _hold_created(core: RunCore, holding: Holding | None, resolve_secrets: Any) -> Flow[None]:
    """Hold the run this flow just created. Another writer may have held it first, between
    the save and the hold, and moved it on: then continue from its head, as a resume would."""
    if holding is None:
        return
    yield from hold(holding, core.run_id)
    row: RunInfo = yield Head(core.run_id)
    if row.head_step != core.head:
        cp: Checkpoint = yield Load(core.run_id, resolve_secrets=resolve_secrets)
        yield from _continue(core, cp)


def _continue(core: RunCore, cp: Checkpoint, row_status: Status | None = None) -> Flow[None]:
    """Carry on from ``cp``, just loaded: the row's status, then what it left pending."""
    yield from _row_status(core, cp, row_status)
    core.carry(cp)
    yield from _settle(core)


def resume_loaded(core: RunCore, run_id: str, cp: Checkpoint | None, row_status: Status | None) -> Flow[None]:
    """Carry on from ``cp``, the run's head as a worker loaded (and verified) it under the
    lease it still holds, as ``resume`` does from its own load; None: the run moved on since
    (a save, another ``Run``), so load it. ``row_status`` is the run row's status as the
    worker's claim found it (None: read the row)."""
    if cp is None:
        yield from resume(core, run_id, False)
        return
    yield from _continue(core, cp, row_status)


def resume(core: RunCore, run_id: str, resolve_secrets: Any, holding: Holding | None = None) -> Flow[None]:
    """Hold the run, load its latest checkpoint and settle what it left pending."""
    core.resolve_secrets = resolve_secrets
    yield from hold(holding, run_id)
    cp: Checkpoint = yield Load(run_id, resolve_secrets=resolve_secrets)
    yield from _continue(core, cp)


def _row_status(core: RunCore, cp: Checkpoint, known: Status | None = None) -> Flow[None]:
    """A run its row calls ``failed`` (quarantined by a worker) is failed, whatever its head
    says. ``known``: the row's status, already read (None: read it now)."""
    if cp.status is Status.RUNNING:
        if known is None:
            row: RunInfo = yield Head(cp.run_id)
            known = row.status
        if known is Status.FAILED:
            cp.status = Status.FAILED


def resume_or_start(
    core: RunCore, new: NewRun, resolve_secrets: Any, holding: Holding | None = None
) -> Flow[None]:
    """Resume the run if it exists, else start it (``new.run_id`` is required)."""
    assert new.run_id is not None
    core.resolve_secrets = resolve_secrets
    try:
        yield from hold(holding, new.run_id)  # NotFound: there is no run to hold yet
        cp: Checkpoint = yield Load(new.run_id, resolve_secrets=resolve_secrets)
    except NotFound:
        try:
            yield from _create(core, new)
        except Conflict:  # another process started it first: resume theirs
            yield from hold(holding, new.run_id)
            cp = yield Load(new.run_id, resolve_secrets=resolve_secrets)
        else:
            yield from _hold_created(core, holding, resolve_secrets)
            return
    yield from _continue(core, cp)


def resume_with(
    core: RunCore, run_id: str, answer: Any, resolve_secrets: Any, holding: Holding | None = None
) -> Flow[None]:
    """Record a human's answer to a waiting run, save it, and resume the run."""
    core.resolve_secrets = resolve_secrets
    yield from hold(holding, run_id)
    cp: Checkpoint = yield Load(run_id, resolve_secrets=resolve_secrets)
    if cp.status is not Status.WAITING:
        raise RunStatusError(run_id, cp.status.value, "resume_with needs a run that is waiting")
    core.carry(cp)
    pending = core.cp.pending_action
    if pending_kind(pending) == ACTION:
        assert pending is not None
        action = PendingAction.from_json(pending, run_id=run_id, status=cp.status.value)
        if not isinstance(answer, Reconcile) or answer.decision == "wait":
            raise InvalidArgument(
                f"run {run_id!r} waits for a decision on its interrupted action {action.tool!r}: "
                "answer with Reconcile.skip(result) or Reconcile.rerun()"
            )
        core.cp.pending_action = action.resolved(answer).to_json()
    else:
        if isinstance(answer, Reconcile):
            raise InvalidArgument(f"run {run_id!r} waits for input, not for a Reconcile decision")
        question = None if pending is None else pending.get("question")
        core.cp.pending_action = {"kind": INPUT, "question": question, "answer": answer}
    core.cp.status = Status.RUNNING
    yield from core.save()
    yield from _settle(core)


def set_budget(
    core: RunCore, run_id: str, limits: budgets.Budget, holding: Holding | None = None
) -> Flow[None]:
    """Set the limits ``limits`` gives (the others stay) as one new checkpoint.

    A run its budget failed (failed, and over a limit) runs again once the
    new limits cover what it used; one still over them stays failed. A run
    that failed otherwise, or is done or cancelled, is refused.
    """
    yield from hold(holding, run_id)
    cp: Checkpoint = yield Load(run_id)
    exceeded = budgets.over_usage(run_id, cp.counters) or budgets.at_step_limit(run_id, cp.counters)
    if cp.status in (Status.DONE, Status.CANCELLED) or (cp.status is Status.FAILED and exceeded is None):
        why = "it did not fail by its budget" if cp.status is Status.FAILED else "it is over"
        raise RunStatusError(run_id, cp.status.value, f"a new budget would not make it run: {why}")
    core.carry(cp)
    counters = core.cp.counters
    counters.update(limits.to_counters())
    if (
        cp.status is Status.FAILED
        and (budgets.over_usage(run_id, counters) or budgets.at_step_limit(run_id, counters)) is None
    ):
        core.cp.status = Status.RUNNING
    yield from core.save()


def _settle(core: RunCore) -> Flow[None]:
    """After a load: enforce the budgets, and settle an interrupted action — with the result the
    journal recorded for it if there is one, else as its reconcile hook (or a human) decides."""
    cp = core.cp
    if cp.status is not Status.RUNNING:
        return
    exceeded = budgets.over_usage(core.run_id, cp.counters) or budgets.at_step_limit(core.run_id, cp.counters)
    if exceeded is not None:
        yield from core.fail(exceeded)
    if pending_kind(cp.pending_action) != ACTION:
        return
    assert cp.pending_action is not None
    action = PendingAction.from_json(cp.pending_action, run_id=core.run_id, status=cp.status.value)
    core.place = action.call
    # Its result recorded, the action happened and returned: no hook is asked (nor a human's answer used).
    found = yield from journaled.recorded_action(core, action)
    if found is not None:
        core.replay, core.recorded = (action, Reconcile.skip(found.result)), True
        return
    decision = action.resolution
    if decision is None:
        core.journal.reconciled += 1
        hook = core.hooks.get(action.tool)
        if hook is None:
            decision = Reconcile.wait(default_question(action))
        elif isinstance(hook, Reconcile):
            decision = hook
        else:
            decision = check_decision(action.tool, (yield Invoke(hook, (action,))))
    if decision.decision == "wait":
        cp.pending_action = action.waiting(decision.question or default_question(action)).to_json()
        cp.status = Status.WAITING
        yield from core.save()
        return
    core.replay, core.recorded = (action, decision), False
