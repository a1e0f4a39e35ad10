"""Google ADK on safepoint: sessions that survive restarts.

    python examples/google_adk_example.py [STORE_URL]

STORE_URL defaults to sqlite:///.safepoint/google-adk-example.db (a PostgreSQL
URL works the same). The example is offline: CannedModel stands in for a real
model — with an API key, drop it and write LlmAgent(..., model="gemini-2.5-flash").
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types

import safepoint
from safepoint.adapters.google_adk import SafepointSessionService


class CannedModel(BaseLlm):
    """Replies with the next canned answer; nothing leaves the machine."""

    model: str = "canned"
    replies: list[str]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        text = self.replies.pop(0)
        usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=1, candidates_token_count=1)
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=text)]), usage_metadata=usage
        )


async def ask(runner: Runner, user_id: str, session_id: str, text: str) -> str:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    answer = ""
    async for event in runner.run_async(user_id=user_id, session_id=session_id, new_message=message):
        if event.content and event.content.parts and event.content.parts[0].text:
            answer = event.content.parts[0].text
    return answer


async def main(url: str) -> None:
    user_id, session_id = "ada", f"chat-{uuid.uuid4().hex[:8]}"

    # 1. The one-line switch: session_service=SafepointSessionService(store).
    store = safepoint.open_store(url)
    agent = LlmAgent(name="assistant", model=CannedModel(replies=["Hi Ada!"]), output_key="user:last_reply")
    runner = Runner(agent=agent, app_name="helpdesk", session_service=SafepointSessionService(store))
    await runner.session_service.create_session(
        app_name="helpdesk", user_id=user_id, session_id=session_id, state={"user:name": "Ada"}
    )
    print("turn 1:", await ask(runner, user_id, session_id, "My name is Ada."))
    store.close()  # the process may stop here: the session is in the store

    # 2. Later, in any process with the same store, the session goes on.
    store = safepoint.open_store(url)
    service = SafepointSessionService(store)
    agent = LlmAgent(
        name="assistant", model=CannedModel(replies=["You are Ada."]), output_key="user:last_reply"
    )
    runner = Runner(agent=agent, app_name="helpdesk", session_service=service)
    print("turn 2:", await ask(runner, user_id, session_id, "What is my name?"))
    session = await service.get_session(app_name="helpdesk", user_id=user_id, session_id=session_id)
    assert session is not None
    print("events in the session:", len(session.events))
    print("user state:", await service.get_user_state(app_name="helpdesk", user_id=user_id))
    run_id = f"google-adk/helpdesk/{user_id}/{session_id}"
    print("events per step:", [info.message_count for info in store.history(run_id)])
    store.close()

    print(f"inspect it:  safepoint show {run_id} --store {url}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///.safepoint/google-adk-example.db"))
