"""Shared offline pieces: a scripted chat model (real _generate/_stream/_agenerate/_astream,
random tool-call ids like a real provider, usage metadata) and an agent graph with a ToolNode."""
from __future__ import annotations

import json
import os
import uuid
from typing import Any, Iterator, AsyncIterator

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

PROVIDER_CALLS: list[str] = []  # every time the "provider" is really hit


def _script(messages: list[BaseMessage]) -> AIMessage:
    n_tool = sum(isinstance(m, ToolMessage) for m in messages)
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    if n_tool == 0:
        return AIMessage(
            content="",
            tool_calls=[
                {"name": "pay", "args": {"amount": 3}, "id": "call_" + uuid.uuid4().hex[:8]},
                {"name": "lookup", "args": {"q": "x"}, "id": "call_" + uuid.uuid4().hex[:8]},
            ],
            usage_metadata=usage,
        )
    return AIMessage(content=f"done after {n_tool} tool results", usage_metadata=usage)


class ScriptedModel(BaseChatModel):
    tag: str = "m"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, **kw):  # the generic provider pattern: bind kwargs
        return self.bind(tools=[getattr(t, "name", str(t)) for t in tools], **kw)

    def _hit(self, how: str) -> AIMessage:
        PROVIDER_CALLS.append(how)
        if os.environ.get("LEDGER"):
            with open(os.environ["LEDGER"], "a") as f:
                f.write(json.dumps({"kind": "provider", "how": how, "pid": os.getpid()}) + "\n")
        return None  # type: ignore

    def _generate(self, messages, stop=None, run_manager=None, **kw) -> ChatResult:
        self._hit("_generate")
        return ChatResult(generations=[ChatGeneration(message=_script(messages))])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kw) -> ChatResult:
        self._hit("_agenerate")
        return ChatResult(generations=[ChatGeneration(message=_script(messages))])

    def _chunks(self, messages) -> Iterator[ChatGenerationChunk]:
        msg = _script(messages)
        if msg.content:
            for w in str(msg.content).split(" "):
                yield ChatGenerationChunk(message=AIMessageChunk(content=w + " "))
        for i, tc in enumerate(msg.tool_calls):
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[
                tool_call_chunk(name=tc["name"], args=json.dumps(tc["args"]), id=tc["id"], index=i)]))
        yield ChatGenerationChunk(message=AIMessageChunk(content="", usage_metadata=msg.usage_metadata))

    def _stream(self, messages, stop=None, run_manager=None, **kw) -> Iterator[ChatGenerationChunk]:
        self._hit("_stream")
        yield from self._chunks(messages)

    async def _astream(self, messages, stop=None, run_manager=None, **kw) -> AsyncIterator[ChatGenerationChunk]:
        self._hit("_astream")
        for c in self._chunks(messages):
            yield c
