"""The journal's durable unit: each operation Pydantic AI routes through the backend, replayed or made.

``BaseDurabilityCapability`` hands every durable unit of a run to its
backend's ``execute`` — a model request (plain or streamed), a message
compaction, a function, MCP or dynamic tool call, a capability's
``@durable_operation``, and the run's bookkeeping units (argument
validation, event handling, cancelling a suspended response). Inside a
journaled turn (``turn.ACTIVE``) the first four run one of
``safepoint.journal``'s flows — unless called inside another unit's body,
which they are part of; the bookkeeping units, which pay for nothing
and change nothing outside the run, simply run. Outside a turn every unit runs.

``body()`` is the framework's own: it makes the call and encodes its result
with the capability's codec (``JSON_CODEC``, Pydantic AI's own
``TypeAdapter``), so what is recorded is the framework's JSON, and a replayed
unit hands that JSON back for the framework to decode into its own objects.
Each unit is reported with ``record_durable_unit``: ``executed=False`` when
it was replayed, so its spans and token metrics stay out of telemetry.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from safepoint import codec
from safepoint.journal import Tally, ToolPolicy, model_call, tool_call
from safepoint.journal.holding import serve
from safepoint.reconcile import Reconcile

from . import framework
from .framework import (
    CapabilityOperationId,
    JournalCallableOperationBackend,
    ModelCompactMessagesId,
    ModelRequestId,
    ToolsetCallToolId,
    record_durable_unit,
)
from .turn import ACTIVE, CALL_KEY, Turn, key_part

IDEMPOTENT = ToolPolicy()
TOOL_CONFIG_KEY = "safepoint"  # tool metadata the journal reads: {"safepoint": {"idempotent": False, …}}


def _same(value: Any) -> Any:
    return value


def digest(value: Any) -> str:
    return hashlib.sha256(codec.encode(value)).hexdigest()


class JournalBackend(JournalCallableOperationBackend[Any]):
    """Runs each durable unit through the turn's journal (Pydantic AI's journal naming)."""

    async def execute(
        self,
        *,
        operation_id: Any,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: Any,
    ) -> object:
        turn = ACTIVE.get()
        if turn is None:
            return await body()
        if framework.in_durable_unit():
            # A unit inside another (an agent a tool runs, an operation a tool calls): part of that
            # call, recorded and replayed with it — a key of its own would shift the turn's order.
            result = await body()
            record_durable_unit(executed=True)
            return result
        if isinstance(operation_id, ModelRequestId):
            messages, settings, parameters = framework.model_request(cache_key)
            request = _model_request(turn, operation_id.model_name, messages, settings, parameters)
            return await _model(turn, "model", request, body)
        if isinstance(operation_id, ModelCompactMessagesId):
            request = {"compact": framework.jsonable(cache_key[1:-1]), "history": turn.history_digest}
            return await _model(turn, "compact", request, body)
        if isinstance(operation_id, ToolsetCallToolId):
            call = framework.tool_call(cache_key)
            key = turn.tool_key(operation_id.toolset_id, call.name, call.call_id)
            policy = _policy(turn, call.name, config)
            request = {"tool": call.name, "args": framework.jsonable(call.args)}
            return await _tool(turn, key, call.name, request, body, policy, turn.tools)
        if isinstance(operation_id, CapabilityOperationId):
            kind = f"cap:{key_part(operation_id.capability_id)}.{key_part(operation_id.operation)}"
            request = {"arguments": framework.jsonable(cache_key[1:-1])}
            return await _tool(turn, turn.next_key(kind), kind, request, body, IDEMPOTENT, turn.operations)
        result = await body()  # bookkeeping: validation, events, a suspended response's cancel
        record_durable_unit(executed=True)
        return result


def _model_request(turn: Turn, model: str, messages: list[Any], settings: Any, parameters: Any) -> Any:
    """What a model request's digest covers: the model, what the turn added to the history (the
    history itself by its digest, computed once per turn), the settings, the tools offered."""
    added = messages[turn.messages :] if len(messages) >= turn.messages else messages
    tools = sorted(getattr(tool, "name", "") for tool in getattr(parameters, "function_tools", ()) or ())
    output = sorted(getattr(tool, "name", "") for tool in getattr(parameters, "output_tools", ()) or ())
    return {
        "model": model,
        "history": turn.history_digest,
        "messages": framework.messages_projection(added),
        "settings": framework.jsonable(settings),
        "tools": tools,
        "output": output,
    }


def _policy(turn: Turn, tool: str, config: Any) -> ToolPolicy:
    """The journal's option for ``tool`` by name, else its ``safepoint`` metadata, else idempotent."""
    named = turn.policies.get(tool)
    if named is not None:
        return named
    if isinstance(config, dict) and config.get("idempotent") is False:
        return ToolPolicy(idempotent=False, reconcile=config.get("reconcile"))
    return IDEMPOTENT


async def _model(turn: Turn, kind: str, request: Any, body: Callable[[], Awaitable[object]]) -> object:
    tally = turn.models
    replayed, place = tally.replayed, turn.order.get(kind, 0)
    key = turn.next_key(kind)
    # A request found in flight is noted by model_call before it is sent again (a marker entry,
    # which the conversation's next save counts) — unless the intent is this turn's own failed
    # attempt, made again: no crash.
    flow = model_call(
        turn.place(),
        key,
        request,
        body,
        encode=_same,
        decode=_same,
        usage_of=turn.usage_of,
        tally=tally,
        resolve_secrets=turn.resolve_secrets,
    )
    try:
        result = await serve(turn.store, flow)
    except BaseException:
        # A failed request leaves its place to the framework's next attempt at it (a capability's
        # RetryModelRequest): that attempt takes the same key, so a resumed turn's keys line up.
        turn.order[kind] = place
        raise
    record_durable_unit(executed=tally.replayed == replayed)
    return result


async def _tool(  # noqa: PLR0917 - private, called with the call's whole context
    turn: Turn,
    key: str,
    name: str,
    request: Any,
    body: Callable[[], Awaitable[object]],
    policy: ToolPolicy,
    tally: Tally,
) -> object:
    async def run() -> object:
        token = CALL_KEY.set(key)
        try:
            return await body()
        finally:
            CALL_KEY.reset(token)

    replayed = tally.replayed
    if not policy.idempotent:
        policy = ToolPolicy(idempotent=False, reconcile=_recorded_as_tool_return(policy.reconcile))
    flow = tool_call(
        turn.place(),
        key,
        name,
        request,
        run,
        policy=policy,
        encode=_same,
        decode=_same,
        tally=tally,
        resolve_secrets=turn.resolve_secrets,
    )
    result = await serve(turn.store, flow)
    record_durable_unit(executed=tally.replayed == replayed)
    return result


def _recorded_as_tool_return(hook: Any) -> Any:
    """The hook, with a ``skip(result)`` turned into the framework's recorded tool return (what the
    tool would have returned), so the run goes on with ``result`` as the tool's answer."""
    if hook is None:
        return None

    def settle(decision: Any) -> Any:
        if isinstance(decision, Reconcile) and decision.decision == "skip":
            return Reconcile.skip(framework.tool_return(decision.result))
        return decision

    if isinstance(hook, Reconcile):
        return settle(hook)

    def wrapped(key: str, tool: str, args: Any) -> Any:
        decision = hook(key, tool, args.get("args") if isinstance(args, dict) else args)
        if inspect.isawaitable(decision):
            pending = decision

            async def later() -> Any:
                return settle(await pending)

            return later()
        return settle(decision)

    return wrapped
