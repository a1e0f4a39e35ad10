"""Tool calls under the journal, through ``ToolNode``'s public wrappers.

``ToolNode(tools, **journal_tools())`` runs every tool call of a journaled
turn through ``safepoint.journal.tool_call``: a recorded result comes back
without running the tool, a new one is recorded once the tool returns. A
tool marked non-idempotent (``@non_idempotent``, or by name in
``JournalOptions.non_idempotent``) writes an intent first; found in flight
after a crash (an intent, no result, its writer gone) it goes to its
reconcile decision: ``Reconcile.rerun()`` runs it again, ``Reconcile.skip(result)``
takes ``result`` as what it returned, ``Reconcile.wait(question)`` pauses the
graph with a LangGraph ``interrupt`` — answer it with
``Command(resume={"decision": "skip", "result": ...})`` (or ``"rerun"``).

While a tool runs, ``current_call_key()`` is its journal key: stable across
crashes and resumes, unique in the thread, so the tool can hand it to a
service as its idempotency key.

A tool that interrupts the graph itself (``interrupt()`` in its body) is
run again when the graph resumes, as LangGraph does: a non-idempotent one
records that it paused, and its resumed run gets an intent of its own.
A tool returning a ``Command`` is run but not recorded (counted in
``Tally.unrecorded``): a ``Command`` is not a plain value.
"""

from __future__ import annotations

import contextvars
import json
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from langchain_core.messages import ToolMessage, message_to_dict, messages_from_dict
from langchain_core.tools import BaseTool
from langgraph.errors import GraphInterrupt
from langgraph.types import interrupt

from safepoint import codec
from safepoint.flow import RecordCall
from safepoint.journal import NOT_RECORDABLE, ActionWaiting, Tally, ToolPolicy, tool_call
from safepoint.twins import awaiting, blocking, translate

from .journal import decided, journal_of, key_base

__all__ = ["current_call_key", "journal_tools", "non_idempotent", "tool_scope"]

T = TypeVar("T")

_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("safepoint_call_key", default=None)
_scope: contextvars.ContextVar[str | None] = contextvars.ContextVar("safepoint_tool_scope", default=None)
# id(tool) -> (a weak reference to the tool, its policy): tools are unhashable, and one made per
# request must not be kept alive by its mark.
_POLICIES: dict[int, tuple[weakref.ref[Any], ToolPolicy]] = {}
_MARK = "__safepoint_tool_policy__"
_PAUSED = {"$safepoint": "interrupted"}  # recorded for a non-idempotent tool that interrupted the graph


def current_call_key() -> str | None:
    """The journal key of the tool call running now (None outside a journaled tool call)."""
    return _key.get()


def tool_scope() -> str | None:
    """The tool-call id a model call is made from, if any (its key is scoped by it)."""
    return _scope.get()


def non_idempotent(tool: T | None = None, *, reconcile: Any = None) -> Any:
    """Mark a tool as having an effect a second run would repeat: its calls write an intent first.

    Above or below ``@tool``. ``reconcile`` settles a call found in flight
    after a crash: a ``Reconcile`` (``rerun()``, ``skip(result)``, ``wait(question)``)
    or a function of ``(key, tool_name, args)`` returning one; None waits
    for a human (a LangGraph interrupt).
    """
    policy = ToolPolicy(idempotent=False, reconcile=reconcile)

    def mark(target: T) -> T:
        if isinstance(target, BaseTool):
            key = id(target)
            _POLICIES[key] = (weakref.ref(target, lambda _: _POLICIES.pop(key, None)), policy)
        else:
            setattr(target, _MARK, policy)
        return target

    return mark if tool is None else mark(tool)


def journal_tools() -> dict[str, Any]:
    """``ToolNode``'s wrappers that journal its tool calls: ``ToolNode(tools, **journal_tools())``.
    They do nothing unless the graph's checkpointer is a journaling ``SafepointSaver``."""
    return {"wrap_tool_call": wrap_tool_call, "awrap_tool_call": awrap_tool_call}


def policy_of(tool: Any, name: str, configured: Any) -> ToolPolicy:
    known = _POLICIES.get(id(tool))
    if known is not None and known[0]() is tool:
        return known[1]
    for function in (getattr(tool, "func", None), getattr(tool, "coroutine", None)):
        marked = getattr(function, _MARK, None)
        if isinstance(marked, ToolPolicy):
            return marked
    if name in configured:
        return ToolPolicy(idempotent=False, reconcile=configured[name])
    return ToolPolicy()


class _Call:
    """One tool call of a journaled turn: its key, its policy and its request."""

    def __init__(self, request: Any) -> None:
        config = request.runtime.config
        self.request = request
        self.journal = journal_of(config)
        self.turn = None if self.journal is None else self.journal.turn_of(config)
        base = None if self.turn is None else key_base(self.turn, config)
        call = request.tool_call
        self.id, self.name = call["id"], call["name"]
        self.key = None if base is None or self.id is None else f"{base}/tool:{self.id}"
        self.args = {"name": self.name, "args": call.get("args")}
        options = self.journal.options if self.journal is not None else None
        self.policy = policy_of(request.tool, self.name, options.non_idempotent if options else {})

    def flow(
        self, key: str, run: Callable[[], Any], policy: ToolPolicy, tally: Tally, *, is_async: bool
    ) -> Any:
        assert self.journal is not None
        assert self.turn is not None
        flow = tool_call(
            self.turn.place(),
            key,
            self.name,
            self.args,
            run,
            policy=policy,
            encode=encode_tool,
            decode=decode_tool,
            tally=tally,
            resolve_secrets=self.journal.options.resolve_secrets,
        )
        return translate(flow, self.journal.rule(is_async=is_async))

    def paused(self, key: str, *, is_async: bool) -> Any:
        """The flow recording that this call interrupted the graph (its resumed run keys anew)."""
        assert self.journal is not None
        assert self.turn is not None
        request = RecordCall(self.turn.run_id, key, dict(_PAUSED), self.args, None, self.turn.lease)
        return translate(_ask(request), self.journal.rule(is_async=is_async))

    def message(self, result: Any) -> Any:
        if isinstance(result, ToolMessage) or not _plain(result):
            return result
        content = result if isinstance(result, str) else json.dumps(result)
        return ToolMessage(content=content, tool_call_id=self.id, name=self.name)


def wrap_tool_call(request: Any, execute: Callable[[Any], Any]) -> Any:
    call = _Call(request)
    if call.key is None:
        return execute(request)

    def runner(key: str, ran: list[bool]) -> Callable[[], Any]:
        def run() -> Any:
            ran.append(True)
            keys = _key.set(key), _scope.set(call.id)
            try:
                return execute(request)
            finally:
                _scope.reset(keys[1])
                _key.reset(keys[0])

        return run

    return blocking(_journaled(call, runner, is_async=False))


async def awrap_tool_call(request: Any, execute: Callable[[Any], Any]) -> Any:
    call = _Call(request)
    if call.key is None:
        return await execute(request)

    def runner(key: str, ran: list[bool]) -> Callable[[], Any]:
        async def run() -> Any:  # the key is set in the task that runs the tool
            ran.append(True)
            keys = _key.set(key), _scope.set(call.id)
            try:
                return await execute(request)
            finally:
                _scope.reset(keys[1])
                _key.reset(keys[0])

        return run

    return await awaiting(_journaled(call, runner, is_async=True))


def _journaled(call: _Call, runner: Callable[[str, list[bool]], Callable[[], Any]], *, is_async: bool) -> Any:
    """A tool call through the journal, written once for both wrappers (a flow): replayed,
    settled, or run and recorded; run again under a key of its own after it interrupted."""
    assert call.key is not None
    assert call.journal is not None
    tally = Tally()
    try:
        attempt, policy = 0, call.policy
        while True:
            key = call.key if attempt == 0 else f"{call.key}/resumed#{attempt}"
            ran: list[bool] = []
            try:
                result = yield from call.flow(key, runner(key, ran), policy, tally, is_async=is_async)
            except ActionWaiting as waiting:  # in flight at a crash, and its decision is wait
                policy = ToolPolicy(idempotent=False, reconcile=_answer(call, key, waiting))
                continue
            except GraphInterrupt:  # the tool asked a human: it runs again, under a key of its own
                if ran and not call.policy.idempotent:
                    yield from call.paused(key, is_async=is_async)
                raise
            if result == _PAUSED:
                attempt += 1
                continue
            return call.message(result)
    finally:
        call.journal.absorb(tally, call.turn)


def _answer(call: _Call, key: str, waiting: ActionWaiting) -> Any:
    """A human's decision on a call found in flight: the graph pauses here (a LangGraph
    interrupt) until it is resumed with one."""
    question = {
        "safepoint": "reconcile",
        "tool": call.name,
        "key": key,
        "args": call.args["args"],
        "question": waiting.question,
    }
    return decided(interrupt(question))


def _ask(request: Any) -> Any:
    return (yield request)


def _plain(value: Any) -> bool:
    return isinstance(value, str) or codec.is_plain_json(value)


# -- the recorded form -----------------------------------------------------------------------


def encode_tool(result: Any) -> Any:
    if not isinstance(result, ToolMessage):
        return NOT_RECORDABLE  # a Command (or anything but a message): run, not recorded
    data = message_to_dict(result)
    return data if codec.is_plain_json(data) else NOT_RECORDABLE


def decode_tool(data: Any) -> Any:
    """A recorded tool message, a reconcile hook's ``skip`` result as it was given, or the
    mark of a call that interrupted the graph."""
    if isinstance(data, dict) and data.get("type") == "tool" and "data" in data:
        return messages_from_dict([data])[0]
    return data
