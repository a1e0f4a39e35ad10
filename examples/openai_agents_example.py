"""OpenAI Agents SDK on safepoint: a conversation that survives restarts, and crashes that repeat nothing.

    python examples/openai_agents_example.py [STORE_URL]

STORE_URL defaults to sqlite:///.safepoint/agents-example.db (a PostgreSQL
URL works the same). The example is offline: CannedModel stands in for a
real model — with an API key, drop it and write Agent(..., model="gpt-4.1").

Two lines make it safepoint's: the session (``SafepointSession`` instead of
``SQLiteSession``) and the runner call (``journal.run`` instead of
``Runner.run``). The journal records every model response and tool result
of a turn in the session's run; a turn killed halfway and run again replays
them, and the welcome email — a tool marked ``@non_idempotent`` — is never
sent twice (docs/journal-openai-agents.md).
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

from agents import Agent, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

import safepoint
from safepoint import Reconcile
from safepoint.adapters.openai_agents import (
    CallJournal,
    SafepointSession,
    current_call_key,
    non_idempotent,
)

OUTBOX: list[str] = []  # stands in for a mail service: the idempotency keys it has seen


class CannedModel(Model):
    """Answers with the next canned step — a tool call (name, arguments) or a text; nothing leaves
    the machine."""

    def __init__(self, *steps: Any) -> None:
        self.steps = list(steps)

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        step = self.steps.pop(0)
        if isinstance(step, tuple):
            name, arguments = step
            call_id = f"call_{uuid.uuid4().hex[:8]}"
            item: Any = ResponseFunctionToolCall(
                type="function_call", call_id=call_id, name=name, arguments=json.dumps(arguments)
            )
        else:
            item = ResponseOutputMessage(
                id=f"msg_{uuid.uuid4().hex[:8]}",
                type="message",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text=step, annotations=[])],
            )
        return ModelResponse(
            output=[item], usage=Usage(requests=1, input_tokens=12, output_tokens=4), response_id=None
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("this example does not stream")


def email_outcome(key: str, tool: str, arguments: Any) -> Reconcile:
    """Asked only for an email a crash interrupted mid-call: did the mail service take it?"""
    return Reconcile.skip("welcome email sent") if key in OUTBOX else Reconcile.rerun()


@non_idempotent(reconcile=email_outcome)
@function_tool
def send_welcome_email(name: str) -> str:
    """Send the user a welcome email (once: the journal's key is the mail service's idempotency key)."""
    OUTBOX.append(current_call_key() or "")
    return "welcome email sent"


async def main(url: str) -> None:
    set_tracing_disabled(True)  # offline: no traces sent anywhere
    user_id = f"user-{uuid.uuid4().hex[:8]}"
    journal = CallJournal()

    # 1. The switch: session=SafepointSession(id, store) and journal.run instead of Runner.run.
    store = safepoint.open_store(url)
    agent = Agent(
        name="assistant",
        instructions="Answer briefly.",
        tools=[send_welcome_email],
        model=CannedModel(("send_welcome_email", {"name": "Ada"}), "Hi Ada! I sent you a welcome email."),
    )
    first = await journal.run(agent, "My name is Ada.", session=SafepointSession(user_id, store))
    print("turn 1:", first.final_output)
    store.close()  # the process may stop here: the conversation and its calls are in the store

    # 2. Later, in any process with the same store, the conversation goes on.
    store = safepoint.open_store(url)
    session = SafepointSession(user_id, store)
    agent = Agent(name="assistant", instructions="Answer briefly.", model=CannedModel("You are Ada."))
    second = await journal.run(agent, "What is my name?", session=session)
    print("turn 2:", second.final_output)
    print("items in the session:", len(await session.get_items()))
    print("emails sent:", len(OUTBOX))
    print("calls recorded:", len(store.recorded_calls(session.run_id)))
    counters = store.load(session.run_id).counters
    print(
        "counters:",
        {name: counters[name] for name in ("model_calls", "tool_calls", "tokens_in", "tokens_out")},
    )
    store.close()

    print(f"inspect it:  safepoint show {session.run_id} --store {url}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///.safepoint/agents-example.db"))
