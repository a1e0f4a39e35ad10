"""A step's journaled calls: what ``run.call`` and ``run.action`` record in the run's call
journal (``safepoint.journal``), and what a resumed run finds there.

Every call a step makes through the journal has a *place*: its index among
the step's journaled calls, actions and ``run.call``s alike (``RunCore.place``,
restored from an interrupted action's ``call`` on resume). With the harness
step it names the call in any process that runs the step again:

* ``run.call(name, request, fn)`` is keyed ``call:<step>.<place>:<name>``
  and goes through the journal's model-call flow (``journal.model_call``):
  a recorded result for the same request is replayed, a changed request is
  called, recorded and counted as a divergence, an intent with no result
  (sent, its answer lost to a crash) is sent again and counted as lost;
* ``run.action`` is keyed by its idempotency key. Its intent is the
  checkpoint saved with the action pending (``core.py``); its result is
  recorded once the tool returns, so a resume that finds it returns it
  without calling the tool or asking its reconcile hook.

Usage comes from the entries: a call's ``CallUsage`` is stored with it and
added to the run's counters once per call, whether this process made it or
replayed it. Re-sent calls are counted apart, in ``lost_*`` counters: an
estimate of what crashes cost, never part of the budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from functools import partial
from typing import Any, Protocol

from safepoint.errors import BudgetExceeded, InvalidArgument, NotJSONCompatible
from safepoint.flow import Flow, RecordCall, RecordedCall
from safepoint.journal import CallUsage, Place, Recorded, Tally, model_call
from safepoint.model import Checkpoint

from . import budgets
from .actions import PendingAction

# What a re-sent call cost, kept in the run's counters apart from its usage (docs/harness.md).
LOST_COUNTERS = ("lost_calls", "lost_tokens_in", "lost_tokens_out", "lost_spend")
MAX_NAME = 200  # a call's name is part of its key: short, as a tool's name is


class RunCore(Protocol):
    """What of a ``core.RunCore`` the journaled calls use (``core.py`` imports this module)."""

    cp: Checkpoint
    place: int
    resolve_secrets: Any
    journal: Tally
    unanswered: set[str]

    @property
    def run_id(self) -> str: ...

    def fail(self, exceeded: BudgetExceeded) -> Flow[None]: ...


def call_key(step: int, place: int, name: str) -> str:
    """The journal key of ``run.call(name, …)`` at ``place`` within harness step ``step``."""
    return f"call:{step}.{place}:{name}"


def action_request(tool: str) -> dict[str, str]:
    """What an action's entry is recorded for: its tool. (Its key already names the run, step
    and place; its arguments as stored may differ from the live ones — secrets become references.)"""
    return {"tool": tool}


# -- run.action ----------------------------------------------------------------------------


def recorded_action(core: RunCore, action: PendingAction) -> Flow[Recorded | None]:
    """The result the journal holds for an interrupted ``action``, or None: it has none (the
    action's reconcile hook decides), or one recorded for another tool (a divergence)."""
    found: Recorded | None = yield RecordedCall(
        core.run_id, action.key, action_request(action.tool), core.resolve_secrets
    )
    if found is None or not found.done:
        return None
    if found.same_request is False:
        core.journal.divergences += 1
        return None
    core.journal.divergences += found.redacted > 0  # a value a rule redacted replays redacted
    return found


def record_action(core: RunCore, action: PendingAction, result: Any) -> Flow[None]:
    """Record what ``action`` returned. A result the store cannot keep as JSON is not recorded
    (counted in ``journal.unrecorded``): the action keeps the guarantee it had without the
    journal — after a crash its reconcile hook decides."""
    try:
        yield RecordCall(core.run_id, action.key, result, action_request(action.tool))
    except NotJSONCompatible:
        core.journal.unrecorded += 1


# -- run.call ------------------------------------------------------------------------------


def checked_usage(name: str, usage: Any) -> CallUsage | None:
    """``usage`` as a ``usage=`` function returned it, checked before it is stored."""
    if usage is None:
        return None
    if not isinstance(usage, CallUsage):
        kind = type(usage).__name__
        raise InvalidArgument(f"the usage of call {name!r} must be a CallUsage or None, not {kind}")
    budgets.check_usage(usage.tokens_in, usage.tokens_out, usage.spend)
    return usage


def call(
    core: RunCore,
    name: str,
    request: Any,
    fn: Callable[[Any], Any],
    usage: Callable[[Any], CallUsage | None] | None,
) -> Flow[Any]:
    """``fn(request)``, or its result recorded at this place of the step (see ``Run.call``)."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        raise InvalidArgument(f"a call's name must be a non-empty str of at most {MAX_NAME} characters")
    place = core.place
    key = call_key(int(core.cp.counters.get("steps", 0)), place, name)
    paid: list[CallUsage | None] = []  # the usage of a call made here, once it returned

    def usage_of(result: Any) -> CallUsage | None:
        paid.append(checked_usage(name, None if usage is None else usage(result)))
        return paid[-1]

    local = Tally()
    core.place += 1
    try:
        result = yield from model_call(
            Place(core.run_id),
            key,
            request,
            partial(fn, request),
            encode=_as_is,
            decode=_as_is,
            usage_of=usage_of,
            tally=local,
            resolve_secrets=core.resolve_secrets,
            # The intent found is this process's own failed attempt (a Run holds no lease to tell
            # it by): no crash — neither counted nor marked as re-sent.
            retried=lambda _found: key in core.unanswered,
        )
    except BaseException:
        if not paid:
            # Nothing came back (the call raised, or its request was refused): the place is
            # free for the step's next call — a retry takes it again, its intent its own.
            core.place = place
            core.unanswered.add(key)
        else:  # paid for, but not recorded (a result the store cannot keep): still spent
            local.count(paid[-1])
            _count(core, local)
        raise
    core.unanswered.discard(key)  # answered now
    _count(core, local)
    exceeded = budgets.over_usage(core.run_id, core.cp.counters)
    if exceeded is not None:
        yield from core.fail(exceeded)
    return result


def _count(core: RunCore, local: Tally) -> None:
    """Add one call's tally to the run's counters and to ``core.journal``."""
    counters = core.cp.counters
    budgets.add_usage(counters, local.tokens_in, local.tokens_out, local.spend)
    if local.resent:
        lost = (local.resent, local.lost_tokens_in, local.lost_tokens_out, local.lost_spend)
        for counter, value in zip(LOST_COUNTERS, lost, strict=True):
            total = counters.get(counter, 0) + value
            counters[counter] = round(total, budgets.SPEND_PLACES) if isinstance(total, float) else total
    journal = core.journal
    for field in fields(Tally):
        value = getattr(local, field.name)
        if isinstance(value, list):
            getattr(journal, field.name).extend(value)
        else:
            setattr(journal, field.name, getattr(journal, field.name) + value)


def _as_is(value: Any) -> Any:
    return value
