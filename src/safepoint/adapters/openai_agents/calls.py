"""The journal at each call: a ``Model`` wrapper, a ``ModelProvider`` wrapper, a tool invoker.

Each runs one of ``safepoint.journal``'s two flows (``model_call``,
``tool_call``) for the turn in ``turn.ACTIVE`` and is a plain pass-through
outside a journaled turn (a clone kept past its turn). What the flows record
and replay is ``jsonform``'s JSON; where they are served, ``holding.serve``.

A model call whose entry holds an intent and no result was in flight at a
crash: it is sent again, marked first by the journal (``model_call`` writes
a ``resent`` marker entry, which a later run of the turn counts, so the paid
repeat is counted even if this process dies too) and logged
(``safepoint.adapters.openai_agents``, a ``resent`` record). A call of this
turn that failed and is retried by the SDK finds its own intent (written
under the turn's lease): that is no crash, and is not counted as one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

from agents.models.interface import Model, ModelProvider
from agents.tool import FunctionTool
from openai.types.responses import ResponseCompletedEvent, ResponseOutputItemDoneEvent

from safepoint.flow import CallIntent, RecordCall
from safepoint.journal import NOT_RECORDABLE, ToolPolicy, model_call, resends, tool_call
from safepoint.journal.holding import serve
from safepoint.twins import Flow, translate

from . import jsonform
from .sdk import is_agent_tool
from .turn import ACTIVE, AGENT, CALL_KEY, PATH, Turn

log = logging.getLogger("safepoint.adapters.openai_agents")
_SIGNATURE = inspect.signature(Model.get_response)
_IDEMPOTENT = ToolPolicy()
_END: Any = object()


def _request(model: Model, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    bound = _SIGNATURE.bind_partial(model, *args, **kwargs).arguments
    return jsonform.model_request(
        bound.get("system_instructions"),
        bound.get("input"),
        list(bound.get("tools") or []),
        list(bound.get("handoffs") or []),
        bound.get("output_schema"),
        bound.get("previous_response_id"),
        bound.get("conversation_id"),
    )


class JournalModel(Model):
    """A model whose responses the turn's journal records and replays (``agent``: the agent it
    belongs to; None for a model the provider resolved by name, whose agent the input filter
    names just before the call)."""

    def __init__(self, inner: Model, agent: str | None) -> None:
        self.inner, self.agent = inner, agent

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        turn = ACTIVE.get()
        if turn is None:
            return await self.inner.get_response(*args, **kwargs)
        send = partial(self.inner.get_response, *args, **kwargs)
        codec = (jsonform.encode_response, jsonform.decode_response, self._usage(turn))
        return await self._journaled(turn, _request(self, args, kwargs), send, codec)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        turn = ACTIVE.get()
        if turn is None:
            return self.inner.stream_response(*args, **kwargs)
        return self._streamed(turn, args, kwargs)

    async def _streamed(
        self, turn: Turn, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> AsyncIterator[Any]:
        """A stream that reaches the caller as it comes, recorded once complete; a replayed one
        is its terminal ``response.completed`` event alone (the SDK builds the turn from it)."""
        queue: asyncio.Queue[Any] = asyncio.Queue()

        async def send() -> Any:
            completed, items = None, []
            async for event in self.inner.stream_response(*args, **kwargs):
                queue.put_nowait(event)
                if isinstance(event, ResponseOutputItemDoneEvent):
                    items.append(event.item)
                elif isinstance(event, ResponseCompletedEvent):
                    completed = event.response
            return None if completed is None else (completed, items)

        usage = self._usage(turn)
        codec = (_encode_stream, _same, lambda r: None if r is None or isinstance(r, dict) else usage(r))
        task = asyncio.ensure_future(self._journaled(turn, _request(self, args, kwargs), send, codec))
        task.add_done_callback(lambda _: queue.put_nowait(_END))
        streamed = False
        try:
            while (event := await queue.get()) is not _END:
                streamed = True
                yield event
            result = task.result()
        finally:
            task.cancel()  # the caller stopped early: the call stays in flight, never recorded
        if isinstance(result, dict) and not streamed:
            response = jsonform.replayed_stream_response(result)
            yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)

    def _usage(self, turn: Turn) -> Callable[[Any], Any]:
        def usage_of(result: Any) -> Any:
            if isinstance(result, tuple):
                return jsonform.call_usage(jsonform.streamed_usage(result[0]), turn.spend)
            return jsonform.call_usage(result.usage, turn.spend)

        return usage_of

    async def _journaled(self, turn: Turn, request: Any, send: Callable[[], Any], codec: Any) -> Any:
        encode, decode, usage_of = codec
        agent = self.agent or AGENT.get() or "agent"
        key, slot, n = turn.next_model_key(agent)
        flow = model_call(
            turn.place(),
            key,
            request,
            send,
            encode=encode,
            decode=decode,
            usage_of=usage_of,
            tally=turn.models,
            resolve_secrets=turn.resolve_secrets,
        )
        try:
            result = await serve(turn.store, translate(flow, partial(_watched, turn, agent)))
        except BaseException:
            turn.order[slot] = n  # a failed call leaves its place to the SDK's retry
            raise
        return result

    def get_retry_advice(self, request: Any) -> Any:
        return self.inner.get_retry_advice(request)

    async def close(self) -> None:
        await self.inner.close()

    async def _cleanup_on_run_end(self, owner: object) -> None:
        cleanup = getattr(self.inner, "_cleanup_on_run_end", None)
        if cleanup is not None:
            await cleanup(owner)


def _encode_stream(result: Any) -> Any:
    if result is None:
        return NOT_RECORDABLE  # the stream ended without its terminal event: nothing to replay
    response, items = result
    output = list(response.output) or items
    return jsonform.response_json(output, jsonform.streamed_usage(response), response.id, None)


def _same(value: Any) -> Any:
    return value


def _watched(turn: Turn, agent: str, request: Any) -> Flow[Any]:
    """A request of the flow, served as it is; a re-send's marker, once written, is logged (before
    the call is sent again), and a call an earlier run re-sent adds its estimate once recorded."""
    value = yield request
    if isinstance(request, CallIntent) and resends.sent_key(request.key) is not None:
        log.warning(
            "a model call of agent %r was in flight at a crash: sent again",
            agent,
            extra={"safepoint_event": "resent"},
        )
    elif isinstance(request, RecordCall) and request.key in turn.pending:
        turn.recorded(request.key, value.usage)
    return value


class JournalProvider(ModelProvider):
    """The run's provider, each model it resolves by name wrapped (``Model`` instances on agents
    never reach a provider: ``graph.py`` wraps those)."""

    def __init__(self, inner: ModelProvider) -> None:
        self.inner = inner

    def get_model(self, model_name: str | None) -> Model:
        model = self.inner.get_model(model_name)
        return model if isinstance(model, JournalModel) else JournalModel(model, None)

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


def journaled_tool(tool: FunctionTool, agent: str, policy: ToolPolicy | None) -> FunctionTool:
    """``tool`` with its invoker journaled under ``agent``; an agent-as-tool only opens its nested
    path (its nested run's calls are journaled one by one, so a resumed run counts them all)."""
    inner = tool.on_invoke_tool
    nested, name = is_agent_tool(tool), tool.name

    # Unannotated on purpose: the SDK then passes the whole ToolContext (tool_call_id and all).
    async def invoke(ctx, input_json):  # type: ignore[no-untyped-def]
        turn = ACTIVE.get()
        if turn is None:
            return await inner(ctx, input_json)
        call_id = getattr(ctx, "tool_call_id", None)
        if nested:
            token = PATH.set(f"{PATH.get()}/{name}:{call_id}")
            try:
                return await inner(ctx, input_json)
            finally:
                PATH.reset(token)
        key = turn.tool_key(agent, name, call_id)

        async def run() -> Any:
            token = CALL_KEY.set(key)
            try:
                return await inner(ctx, input_json)
            finally:
                CALL_KEY.reset(token)

        flow = tool_call(
            turn.place(),
            key,
            name,
            _args(input_json),
            run,
            policy=turn.policies.get(name) or policy or _IDEMPOTENT,  # the journal's option first
            encode=jsonform.encode_tool_result,
            decode=jsonform.decode_tool_result,
            tally=turn.tools,
            resolve_secrets=turn.resolve_secrets,
        )
        return await serve(turn.store, flow)

    return dataclasses.replace(tool, on_invoke_tool=invoke)


def _args(input_json: str) -> Any:
    """The tool's arguments as its reconcile hook is shown them (and their digest)."""
    try:
        return json.loads(input_json) if input_json else {}
    except ValueError:
        return input_json
