"""SafepointConversationStore under a real Pydantic AI Agent, and what safepoint adds.

A real ``pydantic_ai.Agent`` on Pydantic AI's offline ``TestModel`` and
``FunctionModel`` runs multi-turn conversations on the adapter, resumed by a
fresh adapter and by a fresh process; then: entries stored once and
appended, forks stored by reference, labels, typed refusals, the example, and
the ImportError without the extra.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import InMemoryConversationStore
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

import safepoint
from adapter_checks import run_example
from conftest_postgres import fresh_schema, require_postgres
from safepoint import NotJSONCompatible, StoreClosed
from safepoint.adapters.pydantic_ai import SafepointConversationStore

SRC = Path(__file__).parent.parent / "src"
ENV = {**os.environ, "PYTHONPATH": str(SRC)}


def counting_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Answers with how many user prompts it was sent: proof of what the history held."""
    del info
    prompts = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
    return ModelResponse(parts=[TextPart(f"seen {len(prompts)}: {prompts[-1]}")])


async def turn(conversations: Any, cid: str, prompt: str, model: Any = None) -> str:
    agent = Agent(model or FunctionModel(counting_model))
    conversation = await conversations.load(cid) or Conversation(conversation_id=cid)
    result = await agent.run(prompt, conversation=conversation)
    await conversations.save(result)
    return str(result.output)


RESUME = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, sys.argv[2])
    from test_adapter_pydantic_ai_agent import turn
    from safepoint.adapters.pydantic_ai import SafepointConversationStore
    conversations = SafepointConversationStore(sys.argv[1], store_options=dict(eval(sys.argv[3])))
    print(asyncio.run(turn(conversations, "chat", "third, from another process")))
    conversations.close()
    """
)


@pytest.mark.parametrize("kind", ["sqlite", "postgres-async"])
def test_agent_turns_resume_in_fresh_adapters_and_processes(kind: str, tmp_path: Path) -> None:
    """Agent.run turn after turn: fresh adapters and another process each see every earlier turn."""
    url, options = f"sqlite:///{tmp_path / 'state.db'}", {}
    schema_cm = None
    if kind.startswith("postgres"):
        schema_cm = fresh_schema(require_postgres())
        url, options = require_postgres(), {"schema": schema_cm.__enter__(), "max_size": 2}

    async def first_turns() -> list[str]:
        store = await safepoint.open_async_store(url, **options) if kind.endswith("async") else None
        store = store or safepoint.open_store(url, **options)
        outputs = [await turn(SafepointConversationStore(store), "chat", f"turn {n}") for n in range(2)]
        closing = store.close()
        if asyncio.iscoroutine(closing):
            await closing
        return outputs

    try:
        assert asyncio.run(first_turns()) == ["seen 1: turn 0", "seen 2: turn 1"]
        child = subprocess.run(
            [sys.executable, "-c", RESUME, url, str(Path(__file__).parent), repr(options)],
            capture_output=True, text=True, timeout=120, check=False, env=ENV,
        )  # fmt: skip
        assert child.returncode == 0, child.stderr
        assert child.stdout.strip() == "seen 3: third, from another process"
        conversations = SafepointConversationStore(url, store_options=options)
        assert asyncio.run(turn(conversations, "chat", "last")) == "seen 4: last"
        loaded = asyncio.run(conversations.load("chat"))
        assert loaded is not None
        assert len(loaded.messages) == 8
        assert loaded.usage.requests == 4
        conversations.close()
    finally:
        if schema_cm is not None:
            schema_cm.__exit__(None, None, None)


def test_test_model_conversation_matches_the_in_memory_store(tmp_path: Path) -> None:
    """TestModel (with its tool calls) for four turns: the same conversation as on the in-memory store."""

    async def chat(conversations: Any) -> list[Any]:
        agent = Agent(TestModel(), tools=[lambda x: f"tool saw {x}"])  # TestModel calls every tool once
        for n in range(4):
            await turn(conversations, "tools", f"turn {n}", model=agent.model)
        loaded = await conversations.load("tools")
        return [type(m).__name__ for m in loaded.messages] + [loaded.usage.requests, loaded.usage.tool_calls]

    ours = SafepointConversationStore(f"sqlite:///{tmp_path / 'state.db'}")
    assert asyncio.run(chat(ours)) == asyncio.run(chat(InMemoryConversationStore()))
    ours.close()


def test_entries_are_stored_once_and_forks_by_reference(tmp_path: Path) -> None:
    """Each save appends only its new entries; a fork stores none of the history it shares."""
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}")
    conversations = SafepointConversationStore(store)

    async def scenario() -> None:
        for n in range(4):
            await turn(conversations, "long", f"q{n}")
        await conversations.fork("long", at=6, new_conversation_id="side", scope="lab")
        await turn(conversations, "side", "side question")

    asyncio.run(scenario())
    assert [h.message_count for h in store.history("pydantic-ai/long")] == [2, 4, 6, 8]
    assert [h.message_count for h in store.history("pydantic-ai/side")] == [0, 2]
    side = store.load("pydantic-ai/side")
    assert side.parent is not None
    assert side.parent.run_id == "pydantic-ai/long"
    entries = asyncio.run(conversations.load_entries("long"))
    assert entries is not None
    assert side.state["refs"] == [[entries[5].id, "pydantic-ai/long", side.parent.step]]
    assert side.labels["safepoint.adapter"] == "pydantic-ai"
    assert side.labels["pydantic_ai.scope"] == "lab"
    assert side.labels["pydantic_ai.forked_from"] == "long"
    index = [run for run in store.runs(limit=100).items if run.run_id.startswith("pydantic-ai-index/")]
    assert index
    assert all(run.labels["safepoint.role"] == "index" for run in index)
    store.close()


def test_payloads_the_store_cannot_hold_are_refused_by_path(tmp_path: Path) -> None:
    """A lone surrogate (which the in-memory store keeps) is a typed error naming the field, not the value."""
    conversations = SafepointConversationStore(f"sqlite:///{tmp_path / 'state.db'}")
    bad = Conversation(
        conversation_id="c",
        messages=[ModelRequest(parts=[UserPromptPart(content="secret-ish \ud800 text")])],
    )
    with pytest.raises(NotJSONCompatible) as caught:
        asyncio.run(conversations.save(bad))
    assert "messages[0].message.parts[0].content" in str(caught.value)
    assert "secret-ish" not in str(caught.value)
    assert asyncio.run(conversations.load("c")) is None  # nothing was written
    conversations.close()
    with pytest.raises(StoreClosed):
        asyncio.run(conversations.load("c"))


def test_run_ids_are_readable_and_bounded(tmp_path: Path) -> None:
    """Conversation ids become percent-encoded run ids, hashed when too long; run_id_for overrides."""
    conversations = SafepointConversationStore(f"sqlite:///{tmp_path / 'state.db'}")
    assert conversations.run_id("user:42/chat") == "pydantic-ai/user:42/chat"
    assert conversations.run_id("a b%\x00") == "pydantic-ai/a%20b%25%00"
    assert conversations.run_id("x" * 300).startswith("pydantic-ai/#")
    named = SafepointConversationStore(conversations.store, run_id_for=lambda cid: f"mine/{cid}")
    asyncio.run(
        named.save(Conversation(conversation_id="c", messages=[ModelResponse(parts=[TextPart("hi")])]))
    )
    assert conversations.store.run("mine/c").labels["pydantic_ai.conversation_id"] == "c"
    conversations.close()


def test_the_example_runs(tmp_path: Path) -> None:
    """examples/pydantic_ai_example.py (the code docs/adapters.md shows) runs offline as documented."""
    lines = run_example("pydantic_ai", tmp_path)
    assert lines == [
        "turn 1: Noted (1 prompts).",
        "turn 2: You are Ada.",
        "counters: {'lost_tokens_in_estimate': 0, 'lost_tokens_out_estimate': 0, "
        "'tokens_in': 114, 'tokens_out': 12}",
        "fork: You are Ada.",
        "turn 3: (the process died before saving)",
        "turn 3 again: Noted (3 prompts).",
        "model requests made for it: 0",  # the cut turn's response replayed from the journal
        "conversations: ['support-7', 'support-7-retry']",
        "messages stored per step: [0, 2, 4, 6]",  # step 0: the run the journal holds before the first save
        "messages the fork stored: 2 - it reads the rest from "
        "ParentRef(run_id='pydantic-ai/support-7', step=1)",
    ]
