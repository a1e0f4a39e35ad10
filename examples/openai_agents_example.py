"""OpenAI Agents SDK on safepoint: a conversation that survives restarts.

    python examples/openai_agents_example.py [STORE_URL]

STORE_URL defaults to sqlite:///.safepoint/agents-example.db (a PostgreSQL
URL works the same). The example is offline: CannedModel stands in for a
real model — with an API key, drop it and write Agent(..., model="gpt-4.1").
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Any

from agents import Agent, Runner, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

import safepoint
from safepoint.adapters.openai_agents import SafepointSession


class CannedModel(Model):
    """Replies with the next canned answer; nothing leaves the machine."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        text = self.replies.pop(0)
        message = ResponseOutputMessage(
            id=f"msg_{uuid.uuid4().hex[:8]}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("this example does not stream")


async def main(url: str) -> None:
    set_tracing_disabled(True)  # offline: no traces sent anywhere
    user_id = f"user-{uuid.uuid4().hex[:8]}"

    # 1. The one-line switch: session=SafepointSession(id, store) instead of SQLiteSession(id, "db").
    store = safepoint.open_store(url)
    agent = Agent(name="assistant", instructions="Answer briefly.", model=CannedModel("Hi Ada!"))
    first = await Runner.run(agent, "My name is Ada.", session=SafepointSession(user_id, store))
    print("turn 1:", first.final_output)
    store.close()  # the process may stop here: the conversation is in the store

    # 2. Later, in any process with the same store, the conversation goes on.
    store = safepoint.open_store(url)
    session = SafepointSession(user_id, store)
    agent = Agent(name="assistant", instructions="Answer briefly.", model=CannedModel("You are Ada."))
    second = await Runner.run(agent, "What is my name?", session=session)
    print("turn 2:", second.final_output)
    print("items in the session:", len(await session.get_items()))
    print("steps saved:", [info.message_count for info in store.history(session.run_id)])
    store.close()

    print(f"inspect it:  safepoint show {session.run_id} --store {url}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///.safepoint/agents-example.db"))
