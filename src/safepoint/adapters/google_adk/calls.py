"""The journal at each call: ADK's before- and after-callbacks joined into one journal flow.

ADK hands a plugin a model call (a tool call) in two halves: the
before-callback, which may answer in the call's place, and the
after-callback, which sees the call's result. ``safepoint.journal``'s flows
(``model_call``, ``tool_call``) want the call in one piece, as a function they
call. ``Pending`` gives them one: the flow runs as a task whose call waits for
the after-callback. The before-callback starts it and waits until the flow
either answered (replayed, or a reconcile hook's ``skip``: returned in the
call's place, so ADK makes no call) or reached the call (intent written:
ADK goes on and calls); the after-callback hands the result over and waits
for it to be recorded. A call that fails (ADK's error callbacks) ends its
flow with the error: nothing recorded, its intent left in flight.

In SSE streaming, ADK calls the after-model-callback for each partial
chunk and for the complete response; only the complete (non-partial) one is
handed over. A stream cut by a crash never hands one over: in flight.

A model call found in flight (an intent, no result) is counted as re-sent
only when it was cut by a crash: a call this journal saw fail and that is
made again (the same key, the same request) is a retry, counted once as
called.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
from functools import partial
from typing import Any

from safepoint import Reconcile
from safepoint.flow import CallIntent, RecordCall
from safepoint.journal import ToolPolicy, model_call, resends, tool_call
from safepoint.journal.holding import serve
from safepoint.twins import translate

from . import jsonform
from .turn import Turn, add_lost

CALL_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar("safepoint_adk_call_key", default=None)
_IDEMPOTENT = ToolPolicy()
log = logging.getLogger("safepoint.adapters.google_adk")


class Pending:
    """One call between its before- and after-callback: its journal flow, paused at the call."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.outcome: asyncio.Future[Any] = loop.create_future()
        self.reached = asyncio.Event()
        self.task: asyncio.Future[Any] | None = None

    async def call(self) -> Any:
        """The call as the flow makes it: done by ADK, once the before-callback returns None."""
        self.reached.set()
        return await self.outcome

    async def start(self, turn: Turn, flow: Any) -> tuple[bool, Any]:
        """(True, the flow's answer) when it answered without the call; (False, None) once the
        call is to be made by ADK."""
        self.task = task = asyncio.ensure_future(serve(turn.store, flow))
        reached = asyncio.ensure_future(self.reached.wait())
        try:
            await asyncio.wait({task, reached}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            reached.cancel()
        if task.done():
            return True, task.result()
        return False, None

    async def finish(self, result: Any) -> Any:
        """Hand the call's result to the flow; what the run goes on with, once recorded."""
        assert self.task is not None
        if not self.outcome.done():
            self.outcome.set_result(result)
        return await self.task

    async def fail(self, error: BaseException) -> None:
        """The call failed: its flow ends without a record."""
        if self.task is None:
            return
        if not self.outcome.done():
            self.outcome.set_exception(
                error if isinstance(error, Exception) else RuntimeError("call stopped")
            )
        with contextlib.suppress(BaseException):
            await self.task

    def abandon(self) -> None:
        if self.task is not None:
            self.task.cancel()


async def before_model(turn: Turn, slot: tuple[str, str], request: Any) -> Any:
    """A recorded response for this call (ADK then makes none), or None once its intent is
    written and the call is ADK's to make."""
    key, n = turn.model_key(slot)
    pending = Pending()
    flow = model_call(
        turn.place(),
        key,
        jsonform.request_form(request),
        pending.call,
        encode=jsonform.encode_response,
        decode=jsonform.decode_response,
        usage_of=lambda response: jsonform.call_usage(response, turn.spend),
        tally=turn.models,
        resolve_secrets=turn.resolve_secrets,
        retried=lambda found: found.key in turn.failed,
    )
    try:
        answered, response = await pending.start(turn, translate(flow, partial(_watched, turn, slot)))
    except BaseException:
        turn.order[slot] = n  # a failed call leaves its place to a retry
        raise
    if answered:
        return response
    turn.models_open[slot] = (pending, key, n)
    return None


def _watched(turn: Turn, slot: tuple[str, str], request: Any) -> Any:
    """A request of the model flow, served as it is; what it says about re-sends is noted.

    An intent left by a call whose failure this journal saw (ADK's error
    callback: the call ended, nothing was lost) is that call retried — by ADK
    within the turn, or by the app sending the turn's message again — and the
    flow is told so (``retried``): a call like any other, not a re-sent one.
    Any other intent was in flight at a crash: the flow marks it (an entry
    ``<key>!resent:<writer>``, which a later run of the turn counts even if
    this one dies before its next save) before it is sent again, and it is
    logged once marked. A call an earlier run re-sent and never recorded adds
    its estimate once recorded.
    """
    value = yield request
    if isinstance(request, CallIntent) and resends.sent_key(request.key) is not None:
        log.warning(
            "a model call of agent %r was in flight at a crash: sent again",
            slot[1],
            extra={"safepoint_event": "resent"},
        )
    elif isinstance(request, RecordCall) and request.key in turn.lost_pending:
        add_lost(turn.lost_before, value.usage, turn.lost_pending.pop(request.key))
    return value


async def after_model(turn: Turn, slot: tuple[str, str], response: Any) -> Any:
    """Record a complete response of the call open on ``slot``; partial chunks pass by."""
    if getattr(response, "partial", False):
        return None
    opened = turn.models_open.pop(slot, None)
    if opened is None:  # a second complete response of one call, or a call made outside the turn
        return None
    pending, key, _ = opened
    jsonform.name_calls(response, key)
    kept = await pending.finish(response)
    turn.failed.discard(key)
    return None if kept is response else kept  # another writer's record came first: use it


async def model_failed(turn: Turn, slot: tuple[str, str], error: BaseException) -> None:
    opened = turn.models_open.pop(slot, None)
    if opened is not None:
        pending, key, n = opened
        turn.order[slot] = n  # ADK or a plugin may retry the call: the same place, the same key
        turn.failed.add(key)  # ended, not in flight: its retry is no re-sent call
        await pending.fail(error)


def _outcomes(policy: ToolPolicy) -> ToolPolicy:
    """``policy`` with a reconcile hook's ``skip(result)`` recorded as a call that set no actions."""
    hook = policy.reconcile
    if hook is None:
        return policy

    async def reconcile(key: str, name: str, args: Any) -> Any:
        decision = hook(key, name, args) if callable(hook) else hook
        if inspect.isawaitable(decision):
            decision = await decision
        if isinstance(decision, Reconcile) and decision.decision == "skip":
            return Reconcile.skip({"result": decision.result, "actions": {}})
        return decision

    return ToolPolicy(idempotent=policy.idempotent, reconcile=reconcile)


async def before_tool(
    turn: Turn, slot: tuple[str, str], name: str, args: Any, *, call_id: str, policy: Any, actions: Any
) -> Any:
    """The recorded (or reconciled) result of this tool call, its actions set again on
    ``actions``; or None once the call is ADK's to run."""
    key = turn.tool_key(slot, name, call_id)
    pending = Pending()
    flow = tool_call(
        turn.place(),
        key,
        name,
        args,
        pending.call,
        policy=_outcomes(turn.policies.get(name) or policy or _IDEMPOTENT),  # the journal's option first
        encode=jsonform.encode_tool_outcome,
        decode=jsonform.decode_tool_outcome,
        tally=turn.tools,
        resolve_secrets=turn.resolve_secrets,
    )
    answered, outcome = await pending.start(turn, flow)
    if answered:
        if isinstance(outcome, dict):  # a reconcile hook's skip, recorded just now
            outcome = jsonform.decode_tool_outcome(outcome)
        jsonform.replay_actions(outcome.actions, actions)
        result = outcome.result
        return {"result": None} if result is None else result  # None would tell ADK to run the tool
    turn.tools_open[call_id] = pending
    CALL_KEY.set(key)  # the tool runs in this task, after this callback: its idempotency key
    return None


async def after_tool(turn: Turn, call_id: str, result: Any, actions: Any) -> Any:
    pending = turn.tools_open.pop(call_id, None)
    if pending is None:  # replayed: ADK runs the after-callbacks for an answered call too
        return None
    CALL_KEY.set(None)
    outcome = jsonform.ToolOutcome(result, jsonform.actions_json(actions))
    kept = await pending.finish(outcome)
    if kept is outcome:
        return None
    jsonform.replay_actions(kept.actions, actions)  # another writer's record came first: use it
    return kept.result


async def tool_failed(turn: Turn, call_id: str, error: BaseException) -> None:
    pending = turn.tools_open.pop(call_id, None)
    if pending is not None:
        CALL_KEY.set(None)
        await pending.fail(error)
