"""The journal-cost turn on the OpenAI Agents SDK (``sections/journal_frameworks.py``): one agent
on a ``SafepointSession``, run by ``Runner.run`` (without) or ``CallJournal().run`` (with).

The model is a scripted ``Model`` (the SDK's public model interface): asked
after a user message it answers ~500 bytes of text and two function calls,
``lookup`` and ``charge`` (``@non_idempotent`` when journaled); asked after
their ~2 KB results it answers ~4 KB. The turn's asyncio loop is the same
for both ways.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from sections.journal_frameworks import App
from sections.journal_turn import _texts

import safepoint
from safepoint import Reconcile
from safepoint.adapters.openai_agents import CallJournal, SafepointSession, non_idempotent

set_tracing_disabled(True)
TEXTS = _texts()


def _text(text: str, n: int) -> ResponseOutputMessage:
    content = [ResponseOutputText(type="output_text", text=text, annotations=[])]
    return ResponseOutputMessage(
        id=f"msg_{n}", type="message", role="assistant", status="completed", content=content
    )


class Scripted(Model):
    """Tool calls after a user message, the answer after tool results."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        items = kwargs.get("input", args[1] if len(args) > 1 else None)
        last = items[-1] if isinstance(items, list) and items else {}
        last = last if isinstance(last, dict) else last.model_dump()
        n = len(items) if isinstance(items, list) else 0
        usage = Usage(requests=1, input_tokens=10 * n, output_tokens=100)
        if last.get("type") == "function_call_output":
            return ModelResponse(output=[_text(TEXTS["answer"], n)], usage=usage, response_id=None)
        calls = [
            ResponseFunctionToolCall(
                type="function_call", call_id=f"call_{n}_{name}", name=name, arguments=json.dumps(args)
            )
            for name, args in (("lookup", {"query": f"order {n}"}), ("charge", {"amount": n}))
        ]
        return ModelResponse(output=[_text(TEXTS["first"], n), *calls], usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the bench does not stream")


@function_tool
async def lookup(query: str) -> str:
    """Look an order up."""
    return TEXTS["tool"]


@non_idempotent(reconcile=Reconcile.rerun())  # inert under Runner.run (the journal's mark)
@function_tool
async def charge(amount: int) -> str:
    """Charge the customer's card."""
    return TEXTS["tool"]


def open_app(folder: Path, journal: bool) -> App:
    folder.mkdir(parents=True, exist_ok=True)
    store = safepoint.open_store(f"sqlite:///{folder / 'store.db'}")
    session = SafepointSession("bench-journal", store)
    agent = Agent(name="shop", instructions="help", tools=[lookup, charge], model=Scripted())
    calls = CallJournal()
    loop = asyncio.new_event_loop()

    def turn(n: int) -> None:
        message = f"{n}: {TEXTS['user']}"
        if journal:
            loop.run_until_complete(calls.run(agent, message, session=session))
        else:
            loop.run_until_complete(Runner.run(agent, message, session=session))

    def close() -> None:
        loop.close()
        store.close()

    return App(turn, close)
