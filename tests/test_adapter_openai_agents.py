"""SafepointSession against the Agents SDK's own SQLiteSession, and under a real Runner.

Every behaviour scenario runs on ``agents.SQLiteSession`` and on
``SafepointSession`` (SQLite and PostgreSQL, sync and async stores) with the
same inputs, and must observe exactly the same results. Then a real
``agents.Runner`` with an offline model (canned responses, tracing disabled)
runs two turns on a SafepointSession: the second turn sees the first.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, set_tracing_disabled
from agents.items import ModelResponse, TResponseInputItem
from agents.memory import Session, SessionSettings
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

import safepoint
from adapter_checks import BACKEND_KINDS, backend_location, run_example
from safepoint import Status, StoreClosed
from safepoint.adapters.openai_agents import SafepointSession

SRC = Path(__file__).parent.parent / "src"
Make = Callable[..., Awaitable[Any]]  # make(session_id, **settings) -> a session (a new instance each call)
Backend = Callable[[Path], AbstractAsyncContextManager[Make]]

set_tracing_disabled(True)


def user(text: str) -> TResponseInputItem:
    return {"role": "user", "content": text}


ITEMS: list[Any] = [
    user("hello"),
    {"role": "user", "content": [{"type": "input_text", "text": "parts, ünïcode ✓"}]},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "hi there", "annotations": []}],
    },
    {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": '{"q": "x"}', "id": "fc_1"},
    {"type": "function_call_output", "call_id": "call_1", "output": "42"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking"}]},
    {"role": "user", "content": "a tuple inside", "extra": ("comes", "back", "as a list")},
]


# --- the backends: the reference and safepoint's, each a factory of fresh session instances


@asynccontextmanager
async def sqlite_session(tmp: Path) -> AsyncIterator[Make]:
    opened: list[SQLiteSession] = []

    async def make(session_id: str, **kwargs: Any) -> SQLiteSession:
        opened.append(SQLiteSession(session_id, tmp / "reference.db", **kwargs))
        return opened[-1]

    yield make
    for session in opened:
        session.close()


def safepoint_backend(kind: str) -> Backend:
    """Sessions on ``kind``: each instance opens its own store on the same database."""

    @asynccontextmanager
    async def backend(tmp: Path) -> AsyncIterator[Make]:
        with backend_location(kind, tmp) as (url, options):
            stores: list[Any] = []

            async def make(session_id: str, **kwargs: Any) -> SafepointSession:
                if kind.endswith("async"):
                    stores.append(await safepoint.open_async_store(url, **options))
                else:
                    stores.append(safepoint.open_store(url, **options))
                return SafepointSession(session_id, stores[-1], **kwargs)

            try:
                yield make
            finally:
                for store in stores:
                    closing = store.close()
                    if asyncio.iscoroutine(closing):
                        await closing

    return backend


BACKENDS = BACKEND_KINDS


# --- scenarios: each returns everything it observed


async def basics(make: Make) -> list[Any]:
    s = await make("basics")
    seen: list[Any] = [await s.get_items(), await s.pop_item()]
    await s.add_items(ITEMS[:3])
    seen += [await s.get_items(), await s.get_items(limit=2), await s.get_items(limit=0)]
    seen += [await s.get_items(limit=-1), await s.get_items(limit=10), await s.get_items(limit=1)]
    seen += [await s.pop_item(), await s.get_items()]
    await s.add_items([])
    await s.add_items(ITEMS[3:])
    seen += [await s.get_items(), await s.pop_item(), await s.pop_item(), await s.get_items(limit=3)]
    await s.clear_session()
    seen += [await s.get_items(), await s.pop_item()]
    await s.add_items([user("after clear")])
    seen += [await s.get_items()]
    await s.clear_session()
    await s.clear_session()  # clearing an empty session is fine
    return seen


async def isolation(make: Make) -> list[Any]:
    a, b = await make("alice"), await make("bob")
    await a.add_items([user("for alice 1"), user("for alice 2")])
    await b.add_items([user("for bob")])
    seen: list[Any] = [await a.get_items(), await b.get_items()]
    await a.clear_session()
    seen += [await a.get_items(), await b.get_items(), await b.pop_item(), await a.pop_item()]
    seen += [await b.get_items()]
    return seen


async def persistence(make: Make) -> list[Any]:
    first = await make("kept")
    await first.add_items(ITEMS[:4])
    second = await make("kept")  # another instance (for safepoint: another store) on the same database
    seen: list[Any] = [await second.get_items(), await second.pop_item(), await first.get_items()]
    await first.add_items([user("from the first")])
    await second.add_items([user("from the second")])
    seen += [await first.get_items(), await second.get_items(limit=2)]
    return seen


async def settings(make: Make) -> list[Any]:
    s = await make("limited", session_settings=SessionSettings(limit=2))
    await s.add_items([user(f"item {i}") for i in range(5)])
    return [await s.get_items(), await s.get_items(limit=4), await s.get_items(limit=0)]


async def concurrent_adds(make: Make) -> list[Any]:
    s = await make("busy")
    await asyncio.gather(*(s.add_items([user(f"task {i} a"), user(f"task {i} b")]) for i in range(6)))
    items = await s.get_items()
    pairs = [(items[i]["content"], items[i + 1]["content"]) for i in range(0, len(items), 2)]
    return sorted(pairs)  # each add stays contiguous; which task ran first may differ


SCENARIOS = [basics, isolation, persistence, settings, concurrent_adds]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
@pytest.mark.parametrize("backend", BACKENDS)
def test_same_results_as_sqlite_session(
    scenario: Callable[[Make], Any], backend: str, tmp_path: Path
) -> None:
    """On the same inputs, SafepointSession returns exactly what agents.SQLiteSession returns."""

    async def observe(factory: Backend) -> list[Any]:
        async with factory(tmp_path) as make:
            result: list[Any] = await scenario(make)
            return result

    expected = asyncio.run(observe(sqlite_session))
    assert asyncio.run(observe(safepoint_backend(backend))) == expected


# --- a real Runner, offline


class CannedModel(Model):
    """An offline model: answers with its canned replies in order and remembers every input it got."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.inputs: list[Any] = []

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.inputs.append(args[1] if len(args) > 1 else kwargs["input"])
        n = len(self.inputs)
        message = ResponseOutputMessage(
            id=f"msg_{n}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=self.replies[n - 1], annotations=[])],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the tests do not stream")


async def two_turns(session: Session) -> tuple[list[Any], list[Any], list[str]]:
    model = CannedModel(["Nice to meet you, Ada.", "Your name is Ada."])
    agent = Agent(name="assistant", instructions="Answer briefly.", model=model)
    first = await Runner.run(agent, "My name is Ada.", session=session)
    second = await Runner.run(agent, "What is my name?", session=session)
    return model.inputs, await session.get_items(), [str(first.final_output), str(second.final_output)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_runner_second_turn_sees_the_first(backend: str, tmp_path: Path) -> None:
    """Runner.run twice on one SafepointSession: turn two's model input holds turn one's items."""

    async def run(factory: Backend) -> tuple[list[Any], list[Any], list[str]]:
        async with factory(tmp_path) as make:
            return await two_turns(await make("chat"))

    inputs, items, outputs = asyncio.run(run(safepoint_backend(backend)))
    assert outputs == ["Nice to meet you, Ada.", "Your name is Ada."]
    second_input = inputs[1]
    assert second_input[0] == user("My name is Ada.")
    assert second_input[1]["content"][0]["text"] == "Nice to meet you, Ada."
    assert second_input[2] == user("What is my name?")
    assert len(items) == 4
    assert (inputs, items, outputs) == asyncio.run(run(sqlite_session))


# --- what safepoint adds


def test_items_are_stored_incrementally_and_pop_rewrites_nothing(tmp_path: Path) -> None:
    """Each add is one step adding only its items; pop is a step that drops the last from view."""
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}")
    session = SafepointSession("user-42", store)

    async def scenario() -> None:
        for i in range(4):
            await session.add_items([user(f"q{i}"), user(f"a{i}")])
        await session.pop_item()

    asyncio.run(scenario())
    history = store.history("openai-agents/user-42")
    assert [h.message_count for h in history] == [2, 4, 6, 8, 7]
    assert store.run("openai-agents/user-42").labels == {
        "openai_agents.session_id": "user-42",
        "safepoint.adapter": "openai-agents",
    }
    assert store.load("openai-agents/user-42", 3).messages[-1] == user("a3")  # still in the older step
    assert store.run("openai-agents/user-42").status is Status.RUNNING
    store.close()


def test_a_stale_writer_appends_after_the_other(tmp_path: Path) -> None:
    """Two processes' sessions on one conversation: the stale one retries on the new head, losing nothing."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    one, two = SafepointSession("shared", url), SafepointSession("shared", url)

    async def scenario() -> list[Any]:
        await one.add_items([user("one: first")])
        await two.add_items([user("two: first")])
        await one.add_items([user("one: second")])  # its cached head is a step behind
        await two.pop_item()
        return await one.get_items()

    assert asyncio.run(scenario()) == [user("one: first"), user("two: first")]
    one.close()
    two.close()


def test_protocol_names_and_closing(tmp_path: Path) -> None:
    """SafepointSession is an agents Session; a closed session refuses calls; a URL store is its own."""
    session = SafepointSession("s", f"sqlite:///{tmp_path / 'state.db'}")
    assert isinstance(session, Session)
    assert session.run_id == "openai-agents/s"
    assert SafepointSession("a/b %", session.store).run_id == "openai-agents/a%2Fb%20%25"
    assert SafepointSession("x" * 300, session.store).run_id.startswith("openai-agents/#")
    session.close()
    with pytest.raises(StoreClosed, match="closed"):
        asyncio.run(session.get_items())


def test_the_example_runs(tmp_path: Path) -> None:
    """examples/openai_agents_example.py (the code docs/adapters.md shows) runs offline as documented."""
    lines = run_example("openai_agents", tmp_path)
    assert lines[:6] == [
        "turn 1: Hi Ada! I sent you a welcome email.",
        "turn 2: You are Ada.",
        "items in the session: 6",
        "emails sent: 1",
        "calls recorded: 8",
        "counters: {'model_calls': 3, 'tool_calls': 1, 'tokens_in': 36, 'tokens_out': 12}",
    ]
