"""The journal at each call: three middleware the framework runs around an agent's run, each
model request and each tool call.

* ``ExecutorMiddleware`` (agent middleware) names the workflow executor the
  agent runs in (``turn.EXECUTOR``), for the keys of the calls below it.
* ``ModelMiddleware`` (chat middleware) runs ``safepoint.journal.model_call``:
  a recorded response replays by setting the context's result without
  calling the next step; a new one is recorded once the next step returned.
* ``ToolMiddleware`` (function middleware) runs ``tool_call`` the same way:
  a non-idempotent tool writes its intent first and, found in flight after a
  crash, goes to its reconcile hook.

Outside a journaled turn (``turn.ACTIVE`` unset) each is a pass-through.
Responses are recorded in the framework's own serialization
(``ChatResponse.to_dict``/``from_dict``, ``Content.to_dict``/``from_dict``),
checked to be JSON; what is not is used but not recorded (``NOT_RECORDABLE``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from agent_framework import (
    AgentContext,
    AgentMiddleware,
    ChatContext,
    ChatMiddleware,
    ChatResponse,
    Content,
    FunctionInvocationContext,
    FunctionMiddleware,
    MiddlewareFailure,
)
from pydantic import BaseModel

from safepoint.flow import RecordedCall
from safepoint.journal import NOT_RECORDABLE, ToolPolicy, model_call, tool_call
from safepoint.journal.holding import serve
from safepoint.twins import Flow, translate

from . import framework
from .turn import ACTIVE, CALL_KEY, EXECUTOR

log = logging.getLogger("safepoint.adapters.agent_framework")
POLICY_ATTRIBUTE = "_safepoint_tool_policy"
_IDEMPOTENT = ToolPolicy()
_CONTENTS, _VALUE = "contents", "value"


class ExecutorMiddleware(AgentMiddleware):
    """Names the executor an agent runs in, for the calls of its run."""

    async def process(self, context: AgentContext, call_next: Callable[[], Awaitable[None]]) -> None:
        turn = ACTIVE.get()
        if turn is None:
            await call_next()
            return
        token = EXECUTOR.set(turn.executor_of(context.agent, context.session))
        try:
            await call_next()
        finally:
            EXECUTOR.reset(token)


class ModelMiddleware(ChatMiddleware):
    """Replays a recorded chat response, or records the next step's."""

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        turn = ACTIVE.get()
        if turn is None or context.stream:  # a streamed request is not journaled (docs: limits)
            await call_next()
            return
        executor = EXECUTOR.get() or ""
        key, stem, n = turn.next_model_key(executor)
        seen: dict[str, Any] = {}

        async def send() -> Any:
            found = seen.get("found")
            if found is not None and not found.done:  # logged first: the paid repeat is known if we die too
                log.warning(
                    "a model call of executor %r was in flight at a crash: sent again",
                    executor,
                    extra={"safepoint_event": "resent"},
                )
            await call_next()
            return context.result

        flow = model_call(
            turn.place(),
            key,
            model_request(context),
            send,
            encode=encode_response,
            decode=ChatResponse.from_dict,
            usage_of=turn.usage_of,
            tally=turn.models,
            resolve_secrets=turn.resolve_secrets,
        )
        try:
            context.result = await serve(turn.store, translate(flow, lambda r: _watched(seen, r)))
        except BaseException:
            turn.order[stem] = n  # a failed call leaves its place to a retry
            raise


class ToolMiddleware(FunctionMiddleware):
    """Replays a recorded tool result, or records the tool's (a non-idempotent one: intent first)."""

    async def process(
        self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]
    ) -> None:
        turn = ACTIVE.get()
        if turn is None:
            await call_next()
            return
        name = context.function.name
        key = turn.tool_key(EXECUTOR.get() or "", name, framework.call_id(context.metadata))

        failed: list[BaseException] = []

        async def run() -> Any:
            token = CALL_KEY.set(key)
            try:
                await call_next()
            except BaseException as error:
                failed.append(error)  # the tool's own failure: the framework's to handle
                raise
            finally:
                CALL_KEY.reset(token)
            return context.result

        policy = turn.policies.get(name) or getattr(context.function, POLICY_ATTRIBUTE, None) or _IDEMPOTENT
        flow = tool_call(
            turn.place(),
            key,
            name,
            _arguments(context.arguments),
            run,
            policy=policy,
            encode=encode_tool_result,
            decode=decode_tool_result,
            tally=turn.tools,
            resolve_secrets=turn.resolve_secrets,
        )
        try:
            context.result = await serve(turn.store, flow)
        except Exception as error:
            if error in failed:
                raise
            # The journal's own stop (a reconcile wait, a hook that failed or decided nothing, a
            # lost lease) leaves by the loop's fail-closed escape: any other error would become a
            # tool result the model reads, and it could go on past — or call again — a tool the
            # journal could not settle.
            raise MiddlewareFailure(f"the call journal stopped tool {name!r}") from error


def _watched(seen: dict[str, Any], request: Any) -> Flow[Any]:
    """A request of the flow, served as it is; what the journal found at the key is noted."""
    value = yield request
    if isinstance(request, RecordedCall):
        seen["found"] = value
    return value


def model_request(context: ChatContext) -> Any:
    """What a chat request's digest covers: its messages and the names of its tools."""
    options = context.options or {}
    tools = sorted(str(getattr(t, "name", type(t).__name__)) for t in options.get("tools") or [])
    messages = [_message_digest(m) for m in context.messages]
    return {"messages": messages, "tools": tools, "instructions": _digestible(options.get("instructions"))}


_DIGESTED = ("type", "text", "call_id", "name", "arguments", "result")


def _message_digest(message: Any) -> Any:
    """What of a message a request's digest covers: its role and each content's meaning — never
    the framework's bookkeeping (raw representations, annotations), which a replayed tool result
    or response does not carry the same way as the call that made it."""
    contents = [
        {
            name: _digestible(_plain(getattr(c, name, None)))
            for name in _DIGESTED
            if getattr(c, name, None) is not None
        }
        for c in message.contents
    ]
    return {"role": str(message.role), "contents": contents}


def _plain(value: Any) -> Any:
    if isinstance(value, list) and all(isinstance(c, Content) for c in value):
        return [c.text if c.type == "text" else c.type for c in value]
    return value if isinstance(value, str | int | float | bool | dict | list) else str(value)


def encode_response(response: Any) -> Any:
    if not isinstance(response, ChatResponse):
        return NOT_RECORDABLE
    tree = _json(response.to_dict())
    return NOT_RECORDABLE if tree is NOT_RECORDABLE else tree


def encode_tool_result(result: Any) -> Any:
    """A tool's result: its contents (the framework's parsing), or a JSON value as it is."""
    if isinstance(result, list) and all(isinstance(c, Content) for c in result):
        tree = _json([c.to_dict() for c in result])
        return NOT_RECORDABLE if tree is NOT_RECORDABLE else {_CONTENTS: tree}
    tree = _json(result)
    return NOT_RECORDABLE if tree is NOT_RECORDABLE else {_VALUE: tree}


def decode_tool_result(tree: Any) -> Any:
    if isinstance(tree, dict) and len(tree) == 1:
        if isinstance(tree.get(_CONTENTS), list):
            return [Content.from_dict(item) for item in tree[_CONTENTS]]
        if _VALUE in tree:
            return tree[_VALUE]
    return tree  # a reconcile hook's ``skip`` result, recorded as given


def _arguments(arguments: Any) -> Any:
    if isinstance(arguments, BaseModel):
        return arguments.model_dump(mode="json")
    value = _json(dict(arguments) if arguments is not None else {})
    return {} if value is NOT_RECORDABLE else value


def _json(value: Any) -> Any:
    """``value`` as plain JSON (a copy), or ``NOT_RECORDABLE``."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError):
        return NOT_RECORDABLE
    return json.loads(text)


def _digestible(value: Any) -> Any:
    """``value`` as JSON for a request digest; a part JSON cannot hold, by its type's name."""
    tree = _json(value)
    return {"unrecordable": type(value).__name__} if tree is NOT_RECORDABLE else tree
