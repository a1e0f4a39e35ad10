"""SafepointSessionService under a real ADK Runner, and what safepoint adds to a session service.

A ``google.adk.runners.Runner`` with an offline model (a ``BaseLlm`` returning
canned responses) runs a multi-turn conversation on the adapter, resumed
half-way by a fresh service on a fresh store object, and must see — and leave —
exactly what the same turns leave on ADK's ``InMemorySessionService``. Then:
events stored incrementally, shared scopes fenced between processes, typed
refusals, the missing-extra error and the example.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.platform import time as platform_time
from google.adk.platform import uuid as platform_uuid
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.sessions.base_session_service import BaseSessionService
from google.genai import types
from pydantic import Field

import safepoint
from adapter_checks import run_example
from conftest_postgres import fresh_schema, require_postgres
from safepoint import NotJSONCompatible, StoreClosed
from safepoint.adapters.google_adk import SafepointSessionService
from safepoint.frameworks import is_bookkeeping

SRC = Path(__file__).parent.parent / "src"
TURNS = ["My name is Ada.", "I like printers.", "What is my name?", "And what do I like?"]


class CannedModel(BaseLlm):
    """An offline model: replies in order, remembering the texts of every request it got."""

    model: str = "canned"
    replies: list[str]
    inputs: list[list[str]] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.inputs.append([part.text or "" for c in llm_request.contents for part in c.parts or []])
        usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=3, candidates_token_count=2)
        text = self.replies[len(self.inputs) - 1]
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=text)]), usage_metadata=usage
        )


async def turn(runner: Runner, session_id: str, text: str) -> None:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for _ in runner.run_async(user_id="ada", session_id=session_id, new_message=message):
        pass


async def conversation(services: Callable[[int], BaseSessionService]) -> tuple[list[Any], Any]:
    """The turns, each on ``services(turn)`` with a new Runner; the model's inputs and the final session."""
    clock, ids = itertools.count(1), itertools.count(1)
    platform_time.set_time_provider(lambda: 1_700_000_000.0 + next(clock) / 8)
    platform_uuid.set_id_provider(lambda: f"id-{next(ids)}")
    model = CannedModel(replies=[f"reply {i}" for i in range(len(TURNS))])
    try:
        first = services(0)
        await first.create_session(
            app_name="app", user_id="ada", session_id="chat", state={"user:tone": "warm"}
        )
        for i, text in enumerate(TURNS):
            agent = LlmAgent(name="assistant", model=model, instruction="Be brief.", output_key="user:last")
            await turn(Runner(agent=agent, app_name="app", session_service=services(i)), "chat", text)
        final = await services(len(TURNS)).get_session(app_name="app", user_id="ada", session_id="chat")
        return model.inputs, final.model_dump(mode="json") if final else None
    finally:
        platform_time.reset_time_provider()
        platform_uuid.reset_id_provider()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_runner_resumes_on_a_fresh_service(backend: str, tmp_path: Path) -> None:
    """A Runner's turns, the service and its store replaced half-way, match the same turns in memory."""
    url, options = f"sqlite:///{tmp_path / 'state.db'}", {}
    with fresh_schema(require_postgres()) if backend == "postgres" else nullcontext() as schema:
        if schema is not None:
            url, options = require_postgres(), {"schema": schema, "max_size": 2}
        stores: list[safepoint.Store] = []

        def ours(i: int) -> BaseSessionService:
            if i in {0, 2}:  # a new process, as far as the adapter can tell: a new store and service
                stores.append(safepoint.open_store(url, **options))
                ours.service = SafepointSessionService(stores[-1], segment_size=3)  # type: ignore[attr-defined]
            return ours.service  # type: ignore[attr-defined,no-any-return]

        memory = InMemorySessionService()
        expected = asyncio.run(conversation(lambda _: memory))
        inputs, final = asyncio.run(conversation(ours))
        for store in stores:
            store.close()
    assert (inputs, final) == expected
    assert inputs[2][:4] == [
        "My name is Ada.",
        "reply 0",
        "I like printers.",
        "reply 1",
    ]  # turn 3 saw 1 and 2
    assert final["state"] == {"user:tone": "warm", "user:last": "reply 3"}


def _event(n: int, text: str, delta: dict[str, Any] | None = None) -> Event:
    content = types.Content(role="user", parts=[types.Part(text=text)])
    return Event(id=f"e{n}", author="user", content=content, actions=EventActions(state_delta=delta or {}))


def test_events_are_stored_once_and_appended(tmp_path: Path) -> None:
    """Each append is one step adding one event; each segment starts a new range; labels say what it is."""
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}")
    service = SafepointSessionService(store, segment_size=4)

    async def scenario() -> None:
        session = await service.create_session(
            app_name="app", user_id="u", session_id="s", state={"app:v": 1}
        )
        for n in range(10):
            await service.append_event(session, _event(n, f"text {n}", {"user:n": n, "temp:t": n}))

    asyncio.run(scenario())
    run_id = "google-adk/app/u/s"
    assert [h.message_count for h in store.history(run_id)] == [0, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
    assert store.load(run_id, 4).messages[-1]["content"]["parts"][0]["text"] == "text 3"
    assert "temp:t" not in store.load(run_id).messages[-1]["actions"]["state_delta"]
    assert store.run(run_id).labels == {
        "safepoint.adapter": "google-adk",
        "google_adk.role": "session",
        "google_adk.app_name": "app",
        "google_adk.user_id": "u",
        "google_adk.session_id": "s",
    }
    shared = [
        run for run in store.runs(labels={"safepoint.adapter": "google-adk"}).items if run.run_id != run_id
    ]
    assert sorted(run.run_id for run in shared) == ["google-adk-app/app", "google-adk-user/app/u"]
    assert all(is_bookkeeping(run.labels) for run in shared)
    assert store.load("google-adk-user/app/u").state == {"values": {"n": 9}}
    store.close()


def test_shared_state_writers_in_two_processes_lose_nothing(tmp_path: Path) -> None:
    """Two services on two stores update one user's and one app's state at once: every key lands."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    one, two = SafepointSessionService(url), SafepointSessionService(url)

    async def writer(service: SafepointSessionService, name: str) -> None:
        session = await service.create_session(app_name="app", user_id="u", session_id=name)
        for n in range(8):
            delta = {f"user:{name}{n}": n, f"app:{name}{n}": n}
            await service.append_event(session, _event(n, name, delta))

    async def scenario() -> dict[str, Any]:
        await asyncio.gather(writer(one, "a"), writer(two, "b"))
        return await one.get_user_state(app_name="app", user_id="u")

    user_state = asyncio.run(scenario())
    assert user_state == {f"{name}{n}": n for name in "ab" for n in range(8)}
    session = asyncio.run(two.get_session(app_name="app", user_id="u", session_id="a"))
    assert session is not None
    assert len(session.events) == 8
    assert {k for k in session.state if k.startswith("app:")} == {
        f"app:{c}{n}" for c in "ab" for n in range(8)
    }
    one.close()
    two.close()
    with pytest.raises(StoreClosed):
        asyncio.run(one.list_sessions(app_name="app"))


def test_values_that_are_not_json_are_refused_by_path(tmp_path: Path) -> None:
    """A state value JSON cannot hold, or a lone surrogate, is refused naming the field; nothing is stored."""
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}")
    service = SafepointSessionService(store)

    async def scenario() -> None:
        with pytest.raises(NotJSONCompatible, match=r"state\['secret-ish'\]") as refused:
            await service.create_session(app_name="app", user_id="u", state={"secret-ish": object()})
        assert "object at 0x" not in str(refused.value)
        session = await service.create_session(app_name="app", user_id="u", session_id="s")
        with pytest.raises(NotJSONCompatible, match=r"state_delta\['k'\]"):
            await service.append_event(session, _event(1, "fine", {"k": object()}))
        with pytest.raises(NotJSONCompatible, match="surrogate"):
            await service.append_event(session, _event(2, "lone \ud800 surrogate"))
        with pytest.raises(NotJSONCompatible):
            await service.create_session(app_name="app", user_id="u", session_id="lone \udfff")
        again = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert again is not None
        assert again.events == []

    asyncio.run(scenario())
    assert [h.message_count for h in store.history("google-adk/app/u/s")] == [0]
    store.close()


def test_the_example_runs(tmp_path: Path) -> None:
    """examples/google_adk_example.py (the code docs/adapters.md shows) runs offline as documented:
    a turn cut right after its email, finished by sending the message again, sends it once."""
    lines = run_example("google_adk", tmp_path)
    assert lines[:9] == [
        "turn 1: cut right after the email was sent",
        "turn 1: Hi Ada! I sent you a welcome email.",  # the same message again: the turn finished
        "emails sent: 1",
        "calls recorded: 3",
        "counters: {'model_calls': 2, 'tool_calls': 1, 'tokens_in': 24, 'tokens_out': 8}",
        "turn 2: You are Ada.",
        "events in the session: 6",
        "user state: {'last_reply': 'You are Ada.', 'name': 'Ada'}",
        "events per step: [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6]",  # the cut turn's 3 taken back once
    ]
