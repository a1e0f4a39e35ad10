"""The journal-cost turn on Pydantic AI (``sections/journal_frameworks.py``).

A real ``Agent`` on a ``FunctionModel`` (Pydantic AI's own offline model) with
a ``FunctionToolset``: the user's message; model call 1 answers the first
reply and two tool calls, ``lookup`` and ``charge``; model call 2 answers the
long reply. Each turn is the app's three lines on a
``SafepointConversationStore`` — load the conversation, ``agent.run``, save —
and every turn belongs to one conversation. ``journal=True`` adds the one
line, ``SafepointJournal`` on the agent, with ``charge`` marked
``non_idempotent`` (an intent before its effect).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, FunctionToolset
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits
from sections.journal_frameworks import App
from sections.journal_turn import _texts

import safepoint
from safepoint.adapters.pydantic_ai import SafepointConversationStore, SafepointJournal, non_idempotent

CONVERSATION = "bench-journal"
NO_LIMIT = UsageLimits(request_limit=None)  # the conversation's usage carries over from turn to turn


def _agent(texts: dict[str, str], journal: SafepointJournal[Any] | None) -> Agent[None, str]:
    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        del info
        last = messages[-1]
        asked = isinstance(last, ModelRequest) and any(isinstance(p, UserPromptPart) for p in last.parts)
        usage = RequestUsage(input_tokens=50 * len(messages), output_tokens=120)
        if not asked:  # the tools answered: the long reply
            return ModelResponse(parts=[TextPart(texts["answer"])], usage=usage, model_name="bench")
        n = len(messages)
        calls = [
            ToolCallPart("lookup", {"query": f"order {n}"}, tool_call_id=f"call_{n}_a"),
            ToolCallPart("charge", {"amount": n}, tool_call_id=f"call_{n}_b"),
        ]
        return ModelResponse(parts=[TextPart(texts["first"]), *calls], usage=usage, model_name="bench")

    tools: FunctionToolset[Any] = FunctionToolset(id="bench")

    @tools.tool_plain
    def lookup(query: str) -> str:
        """Look an order up."""
        del query
        return texts["tool"]

    @tools.tool_plain(metadata=non_idempotent() if journal is not None else None)
    def charge(amount: int) -> str:
        """Charge the customer."""
        del amount
        return texts["tool"]

    capabilities = [journal] if journal is not None else []
    return Agent(FunctionModel(reply), name="bench", toolsets=[tools], capabilities=capabilities)


def open_app(folder: Path, journal: bool) -> App:
    folder.mkdir(parents=True, exist_ok=True)
    store = safepoint.open_store(f"sqlite:///{folder / 'store.db'}")
    conversations = SafepointConversationStore(store)
    texts = _texts()
    agent = _agent(texts, SafepointJournal(conversations) if journal else None)
    loop = asyncio.new_event_loop()  # one loop for the app's life, as a server's

    async def chat(n: int) -> None:
        conversation = await conversations.load(CONVERSATION) or Conversation(conversation_id=CONVERSATION)
        prompt = f"{n}: {texts['user']}"
        result = await agent.run(prompt, conversation=conversation, usage_limits=NO_LIMIT)
        await conversations.save(result)

    def turn(n: int) -> None:
        loop.run_until_complete(chat(n))

    def close() -> None:
        loop.close()
        store.close()

    return App(turn, close)
