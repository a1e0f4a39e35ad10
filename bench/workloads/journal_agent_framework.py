"""The journal-cost turn on the Microsoft Agent Framework (``sections/journal_frameworks.py``): a
workflow of one ``AgentExecutor`` checkpointed on ``SafepointCheckpointStorage``, run by
``workflow.run(message)`` (without) or ``CallJournal(storage).run(workflow, message)`` (with).

The chat client is scripted on the framework's public client layers: asked
after a user message it answers ~500 bytes of text and two function calls,
``lookup`` and ``charge`` (``non_idempotent`` when journaled); asked after
their ~2 KB results it answers ~4 KB. A turn is one workflow run; all turns
go to the one safepoint run of the workflow's name.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agent_framework import (
    Agent,
    AgentExecutor,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    Message,
    WorkflowBuilder,
    tool,
)
from sections.journal_frameworks import App
from sections.journal_turn import _texts

import safepoint
from safepoint import Reconcile
from safepoint.adapters.agent_framework import CallJournal, SafepointCheckpointStorage, non_idempotent

TEXTS = _texts()


class Scripted(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):  # type: ignore[misc]
    """Tool calls after the user message, the answer after their results."""

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        return self._answer(list(messages))

    async def _answer(self, messages: list[Message]) -> ChatResponse:
        usage: Any = {"input_token_count": 10 * len(messages), "output_token_count": 100}
        if any(c.type == "function_result" for c in messages[-1].contents):
            reply = Message(role="assistant", contents=[TEXTS["answer"]])
            return ChatResponse(messages=[reply], usage_details=usage)
        n = len(messages)
        calls = [
            Content.from_function_call(call_id=f"call-{n}-{name}", name=name, arguments=json.dumps(args))
            for name, args in (("lookup", {"query": f"order {n}"}), ("charge", {"amount": n}))
        ]
        reply = Message(role="assistant", contents=[TEXTS["first"], *calls])
        return ChatResponse(messages=[reply], usage_details=usage)


@tool
async def lookup(query: str) -> str:
    """Look an order up."""
    return TEXTS["tool"]


@non_idempotent(reconcile=Reconcile.rerun())  # inert outside a journaled run
@tool
async def charge(amount: int) -> str:
    """Charge the customer's card."""
    return TEXTS["tool"]


def open_app(folder: Path, journal: bool) -> App:
    folder.mkdir(parents=True, exist_ok=True)
    store = safepoint.open_store(f"sqlite:///{folder / 'store.db'}")
    storage = SafepointCheckpointStorage(store)
    agent = Agent(Scripted(), name="shop", tools=[lookup, charge])
    workflow = WorkflowBuilder(
        name="bench-journal", start_executor=AgentExecutor(agent, id="shop"), checkpoint_storage=storage
    ).build()
    calls = CallJournal(storage)
    loop = asyncio.new_event_loop()

    def turn(n: int) -> None:
        message = f"{n}: {TEXTS['user']}"
        if journal:
            loop.run_until_complete(calls.run(workflow, message))
        else:
            loop.run_until_complete(workflow.run(message))

    def close() -> None:
        loop.close()
        store.close()

    return App(turn, close)
