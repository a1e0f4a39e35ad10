"""Google ADK on safepoint: sessions that survive restarts, turns that survive crashes.

    python examples/google_adk_example.py [STORE_URL]

STORE_URL defaults to sqlite:///.safepoint/google-adk-example.db (a PostgreSQL
URL works the same). The example is offline: CannedModel stands in for a real
model — with an API key, drop it and write LlmAgent(..., model="gemini-2.5-flash").

Two lines: the session service (``SafepointSessionService``) keeps the
session in the store, and the call journal (``CallJournal``, an ADK plugin)
records every model response and tool result of a turn as it completes. A
turn cut by a crash is finished by sending the same message to the same
session again: the recorded calls are replayed, not made again, so the
welcome email below is sent once and the session holds each event once
(docs/journal-google-adk.md).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

import safepoint
from safepoint import Reconcile
from safepoint.adapters.google_adk import (
    CallJournal,
    SafepointSessionService,
    current_call_key,
    non_idempotent,
)

OUTBOX: list[str] = []  # the mail service: the idempotency keys of the emails it took
CRASH = {"after_email": True}  # this run's power cut, right after the first email


class PowerCut(Exception):
    """Stands in for the process dying in the middle of a turn."""


class CannedModel(BaseLlm):
    """Replies with a canned answer (a text, or a tool to call); nothing leaves the machine.

    Like a provider, it answers from the request alone: reply ``k`` once ``k`` tool results
    follow the user's last message — so a resumed turn asks for the same reply again.
    """

    model: str = "canned"
    replies: list[Any]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        step = 0
        for content in llm_request.contents:
            parts = content.parts or []
            if content.role == "user" and any(p.text for p in parts):
                step = 0
            elif any(p.function_response for p in parts):
                step += 1
        reply = self.replies[step]
        if isinstance(reply, str):
            part = types.Part(text=reply)
        else:
            part = types.Part(function_call=types.FunctionCall(name=reply[0], args=reply[1]))
        usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=12, candidates_token_count=4)
        yield LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=usage)


def email_outcome(key: str, tool: str, arguments: Any) -> Reconcile:
    """Asked only for an email a crash interrupted mid-call: did the mail service take it?"""
    return Reconcile.skip("welcome email sent") if key in OUTBOX else Reconcile.rerun()


async def send_welcome_email(name: str) -> str:
    """Send the user a welcome email (once: the journal's key is the mail service's idempotency key)."""
    OUTBOX.append(current_call_key() or "")
    if CRASH.pop("after_email", False):
        raise PowerCut("the process died right after sending the email")
    return "welcome email sent"


async def ask(runner: Runner, user_id: str, session_id: str, text: str) -> str:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    answer = ""
    async for event in runner.run_async(user_id=user_id, session_id=session_id, new_message=message):
        if event.content and event.content.parts and event.content.parts[0].text:
            answer = event.content.parts[0].text
    return answer


async def main(url: str) -> None:
    user_id, session_id = "ada", f"chat-{uuid.uuid4().hex[:8]}"
    replies: list[Any] = [("send_welcome_email", {"name": "Ada"}), "Hi Ada! I sent you a welcome email."]

    # 1. The switch: session_service=SafepointSessionService(store), plugins=[CallJournal()].
    store = safepoint.open_store(url)
    agent = LlmAgent(
        name="assistant",
        model=CannedModel(replies=replies),
        tools=[non_idempotent(FunctionTool(send_welcome_email), reconcile=email_outcome)],
        output_key="user:last_reply",
    )
    app = App(name="helpdesk", root_agent=agent, plugins=[CallJournal()])
    runner = Runner(app=app, session_service=SafepointSessionService(store))
    await runner.session_service.create_session(
        app_name="helpdesk", user_id=user_id, session_id=session_id, state={"user:name": "Ada"}
    )
    logging.getLogger("google_adk").setLevel(logging.CRITICAL)  # ADK would log the power cut at length
    try:
        await ask(runner, user_id, session_id, "My name is Ada.")
    except PowerCut:
        print("turn 1: cut right after the email was sent")
    store.close()

    # After the crash, in any process: the same message to the same session finishes the turn.
    store = safepoint.open_store(url)
    service = SafepointSessionService(store)
    runner = Runner(
        app=App(name="helpdesk", root_agent=agent, plugins=[CallJournal()]), session_service=service
    )
    print("turn 1:", await ask(runner, user_id, session_id, "My name is Ada."))
    print("emails sent:", len(OUTBOX))
    run_id = service.run_id_of("helpdesk", user_id, session_id)
    print("calls recorded:", len([e for e in store.recorded_calls(run_id) if "|" in e.key]))
    counters = store.load(run_id).counters
    print(
        "counters:",
        {name: counters[name] for name in ("model_calls", "tool_calls", "tokens_in", "tokens_out")},
    )
    store.close()  # the process may stop here: the session and its calls are in the store

    # A runner without the journal reads and continues the same session: the session is the
    # service's, and a turn is journaled where the plugin is.
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
    print("events per step:", [info.message_count for info in store.history(run_id)])
    store.close()

    print(f"inspect it:  safepoint show {run_id} --store {url}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///.safepoint/google-adk-example.db"))
