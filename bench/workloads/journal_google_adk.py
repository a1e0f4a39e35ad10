"""The journal-cost turn on Google ADK (``sections/journal_frameworks.py``): ADK's real ``Runner`` and
``LlmAgent`` with a scripted model on ADK's public ``BaseLlm`` — the user's message, a reply with
``lookup`` and ``charge`` calls, their results, the answer — on a ``SafepointSessionService``, without
and with the journal's one line (``plugins=[CallJournal()]``, ``charge`` marked non-idempotent).

Every turn is a message to the same session, run on one event loop kept for the app (so a turn
is ADK's and safepoint's work, not an event loop's start).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from pathlib import Path

from google.adk.agents import LlmAgent
from google.adk.apps import App as AdkApp
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools.function_tool import FunctionTool
from google.genai import types
from sections.journal_frameworks import App
from sections.journal_turn import _texts

import safepoint
from safepoint.adapters.google_adk import CallJournal, SafepointSessionService, non_idempotent

USER, SESSION = "bench", "bench-journal"


class TurnModel(BaseLlm):
    """Answers from the request alone, as a provider does: no tool result yet since the user's
    last message — the first reply and the two calls; else the answer."""

    model: str = "bench"
    texts: dict[str, str]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        answered = False
        for content in llm_request.contents:
            parts = content.parts or []
            if content.role == "user" and any(p.text for p in parts):
                answered, turn = False, (parts[0].text or "").split(":", 1)[0]
            elif any(p.function_response for p in parts):
                answered = True
        if answered:
            parts = [types.Part(text=self.texts["answer"])]
        else:
            parts = [
                types.Part(text=self.texts["first"]),
                types.Part(function_call=types.FunctionCall(name="lookup", args={"query": f"order {turn}"})),
                types.Part(function_call=types.FunctionCall(name="charge", args={"amount": int(turn)})),
            ]
        usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=120, candidates_token_count=60)
        yield LlmResponse(content=types.Content(role="model", parts=parts), usage_metadata=usage)


def open_app(folder: Path, journal: bool) -> App:
    folder.mkdir(parents=True, exist_ok=True)
    logging.getLogger("google_adk").setLevel(logging.ERROR)
    store = safepoint.open_store(f"sqlite:///{folder / 'store.db'}")
    texts = _texts()

    async def lookup(query: str) -> str:
        """Look an order up."""
        return texts["tool"]

    async def charge(amount: int) -> str:
        """Charge the order (an effect: once)."""
        return texts["tool"]

    charging = FunctionTool(charge)
    agent = LlmAgent(
        name="shop",
        instruction="Help with orders.",
        model=TurnModel(texts=texts),
        tools=[lookup, non_idempotent(charging) if journal else charging],
    )
    service = SafepointSessionService(store)
    plugins = [CallJournal()] if journal else []
    runner = Runner(app=AdkApp(name="bench", root_agent=agent, plugins=plugins), session_service=service)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(service.create_session(app_name="bench", user_id=USER, session_id=SESSION))

    async def one(n: int) -> None:
        message = types.Content(role="user", parts=[types.Part(text=f"{n}: {texts['user']}")])
        async for _ in runner.run_async(user_id=USER, session_id=SESSION, new_message=message):
            pass

    def turn(n: int) -> None:
        loop.run_until_complete(one(n))

    def close() -> None:
        loop.run_until_complete(runner.close())
        loop.close()
        store.close()

    return App(turn, close)
