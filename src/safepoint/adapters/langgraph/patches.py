"""The framework methods the call journal patches, and every private name it touches.

No public LangChain hook can replay a chat model's response on every path:
the model cache serves ``invoke``/``ainvoke`` only (never ``stream``/
``astream``, never a ``cache=False`` model), and callbacks cannot return a
value. So the journal patches ``BaseChatModel`` once, at class level, where
every path passes — ``_generate_with_cache`` and ``_agenerate_with_cache``
(``invoke``, ``ainvoke``, ``generate``, ``batch``, a ``stream`` that falls
back to ``invoke``) and ``stream``/``astream`` (true streaming) — and
LangGraph's ``Pregel.stream``/``astream`` (every ``invoke``, ``ainvoke`` and
streamed run passes there), where a graph turn starts and ends.

Every patch is inert unless the running task's config names a journaling
``SafepointSaver`` as its checkpointer (``configurable["__pregel_checkpointer"]``,
the config ``langchain_core.runnables.config.var_child_runnable_config``
holds, as ``langgraph.config.get_config()`` reads it): other graphs, other
savers and models outside graphs run the original code.

The private names are listed in ``PRIVATE`` and pinned by a test, so a
LangChain or LangGraph release that renames one fails loudly there, not
silently in a user's process.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.pregel import Pregel

__all__ = [
    "CHECKPOINTER",
    "PRIVATE",
    "TASK_ID",
    "install",
    "llm_string",
    "request_messages",
    "running_config",
]

# LangGraph's configurable keys for the task's checkpointer and its task id (langgraph._internal._constants).
CHECKPOINTER = "__pregel_checkpointer"
TASK_ID = "__pregel_task_id"

# Every private name the journal relies on: (owner, attribute). Pinned by tests/test_journal_langgraph.py.
PRIVATE: tuple[tuple[type, str], ...] = (
    (BaseChatModel, "_generate_with_cache"),
    (BaseChatModel, "_agenerate_with_cache"),
    (BaseChatModel, "_should_stream"),
    (BaseChatModel, "_convert_input"),
    (BaseChatModel, "_get_llm_string"),
)

_ORIGINAL: dict[str, Any] = {}
_lock = threading.Lock()

# Set by journal.py (which imports this module): who answers a patched call. Each returns
# None when the call is not journaled, and the patched method then runs the original.
HOOKS: dict[str, Callable[..., Any]] = {}


def running_config(given: Any = None) -> dict[str, Any]:
    """The running task's config (the node's, as LangGraph set it), else ``given``, else {}."""
    found: dict[str, Any] = var_child_runnable_config.get() or given or {}  # type: ignore[assignment]
    return found


def request_messages(model: BaseChatModel, model_input: Any) -> list[BaseMessage]:
    return model._convert_input(model_input).to_messages()


def llm_string(model: BaseChatModel, stop: Any, kwargs: dict[str, Any]) -> str:
    """The model's parameters and bound tools as its cache would key them."""
    return model._get_llm_string(stop=stop, **kwargs)


def _streams(model: BaseChatModel, kwargs: dict[str, Any], *, async_api: bool) -> bool:
    return bool(model._should_stream(async_api=async_api, **{**kwargs, "stream": True}))


class Replay(BaseChatModel):
    """A recorded message given back through LangChain's own machinery (callbacks, tracing and
    ``stream_mode="messages"`` see it as they saw the original), never journaled itself."""

    recorded: Any

    @property
    def _llm_type(self) -> str:
        return "safepoint-journal-replay"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.recorded)])

    def _stream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Iterator[Any]:
        yield ChatGenerationChunk(message=as_chunk(self.recorded))


def as_chunk(message: Any) -> AIMessageChunk:
    """A recorded AI message as one stream chunk (its tool calls as tool-call chunks)."""
    if isinstance(message, AIMessageChunk):
        return message
    fields = message.model_dump(exclude={"type", "tool_calls", "invalid_tool_calls"})
    chunks = [
        {"name": c["name"], "args": _json(c["args"]), "id": c["id"], "index": i, "type": "tool_call_chunk"}
        for i, c in enumerate(message.tool_calls)
    ]
    return AIMessageChunk(**fields, tool_call_chunks=chunks)  # type: ignore[arg-type]


def _json(value: Any) -> str:
    return json.dumps(value)


# -- BaseChatModel ------------------------------------------------------------------------


def _generate_with_cache(
    self: Any, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
) -> Any:
    original = _ORIGINAL["_generate_with_cache"]
    call = None if isinstance(self, Replay) else HOOKS["model"](self, messages, stop, kwargs, None)
    if call is None:
        return original(self, messages, stop=stop, run_manager=run_manager, **kwargs)
    return call.generate(lambda: original(self, messages, stop=stop, run_manager=run_manager, **kwargs))


async def _agenerate_with_cache(
    self: Any, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
) -> Any:
    original = _ORIGINAL["_agenerate_with_cache"]
    call = None if isinstance(self, Replay) else HOOKS["model"](self, messages, stop, kwargs, None)
    if call is None:
        return await original(self, messages, stop=stop, run_manager=run_manager, **kwargs)
    return await call.agenerate(
        lambda: original(self, messages, stop=stop, run_manager=run_manager, **kwargs)
    )


def _stream(self: Any, input: Any, config: Any = None, *, stop: Any = None, **kwargs: Any) -> Iterator[Any]:
    original = _ORIGINAL["stream"]
    call = None
    # A model that does not stream falls back to invoke: journaled there, once.
    if not isinstance(self, Replay) and _streams(self, kwargs, async_api=False):
        call = HOOKS["model"](self, request_messages(self, input), stop, kwargs, config)
    if call is None:
        yield from original(self, input, config, stop=stop, **kwargs)
        return
    yield from call.stream(
        lambda: original(self, input, config, stop=stop, **kwargs),
        lambda recorded: Replay(recorded=recorded).stream(input, config),
    )


async def _astream(
    self: Any, input: Any, config: Any = None, *, stop: Any = None, **kwargs: Any
) -> AsyncIterator[Any]:
    original = _ORIGINAL["astream"]
    call = None
    if not isinstance(self, Replay) and _streams(self, kwargs, async_api=True):
        call = HOOKS["model"](self, request_messages(self, input), stop, kwargs, config)
    if call is None:
        async for chunk in original(self, input, config, stop=stop, **kwargs):
            yield chunk
        return
    async for chunk in call.astream(
        lambda: original(self, input, config, stop=stop, **kwargs),
        lambda recorded: Replay(recorded=recorded).astream(input, config),
    ):
        yield chunk


# -- Pregel: a graph turn -----------------------------------------------------------------


def _graph_stream(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Iterator[Any]:
    original = _ORIGINAL["Pregel.stream"]
    turn = HOOKS["turn"](self, input, config)
    if turn is None:
        yield from original(self, input, config, **kwargs)
        return
    turn.begin()
    try:
        yield from original(self, input, config, **kwargs)
    finally:
        turn.end()


async def _graph_astream(self: Any, input: Any, config: Any = None, **kwargs: Any) -> AsyncIterator[Any]:
    original = _ORIGINAL["Pregel.astream"]
    turn = HOOKS["turn"](self, input, config)
    if turn is None:
        async for chunk in original(self, input, config, **kwargs):
            yield chunk
        return
    await turn.abegin()
    try:
        async for chunk in original(self, input, config, **kwargs):
            yield chunk
    finally:
        await turn.aend()


_PATCHES: tuple[tuple[type, str, str, Any], ...] = (
    (BaseChatModel, "_generate_with_cache", "_generate_with_cache", _generate_with_cache),
    (BaseChatModel, "_agenerate_with_cache", "_agenerate_with_cache", _agenerate_with_cache),
    (BaseChatModel, "stream", "stream", _stream),
    (BaseChatModel, "astream", "astream", _astream),
    (Pregel, "stream", "Pregel.stream", _graph_stream),
    (Pregel, "astream", "Pregel.astream", _graph_astream),
)


def install() -> None:
    """Patch the classes, once per process (a journaling saver calls it when it is made)."""
    with _lock:
        if _ORIGINAL:
            return
        for owner, attribute, name, patched in _PATCHES:
            _ORIGINAL[name] = getattr(owner, attribute)
            patched.__wrapped__ = _ORIGINAL[name]
            patched.__doc__ = _ORIGINAL[name].__doc__
            setattr(owner, attribute, patched)


def installed() -> bool:
    return bool(_ORIGINAL)
