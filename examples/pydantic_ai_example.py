"""A Pydantic AI agent whose conversations live in safepoint: saved turn by turn, resumed, forked.

Its calls go through the journal (``SafepointJournal``, one line on the
agent): a turn cut by a crash is finished by running the same three lines
again — load, run, save — with every recorded call replayed, and the save
then holds each message once (docs/journal-pydantic-ai.md).

Runs offline (a FunctionModel stands in for a real model):

    python examples/pydantic_ai_example.py [STORE_URL]

The default store is sqlite:///.safepoint/pydantic-ai-example.db; pass a
postgresql:// URL to use PostgreSQL. Then look at it with the CLI:

    safepoint runs --label safepoint.adapter=pydantic-ai
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import safepoint
from safepoint.adapters.pydantic_ai import SafepointConversationStore, SafepointJournal


def remembering_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A stand-in model: it knows the user's name if any earlier prompt gave it."""
    del info
    prompts = [str(p.content) for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
    names = [p.removeprefix("My name is ").rstrip(".") for p in prompts if p.startswith("My name is")]
    asked = names and prompts[-1].endswith("?")
    reply = f"You are {names[-1]}." if asked else f"Noted ({len(prompts)} prompts)."
    return ModelResponse(parts=[TextPart(reply)])


ASKED = {"model": 0}  # how many requests reached the stand-in model (a real one bills each)


def counted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    ASKED["model"] += 1
    return remembering_model(messages, info)


async def chat(
    conversations: SafepointConversationStore, conversation_id: str, prompt: str, *, crash: bool = False
) -> str:
    """One turn: load the conversation (or start it), run the agent on it, save what it added.
    After a crash, call it again with the same prompt: the cut turn finishes, nothing twice.
    (``crash``: stop before the save, as a process killed there would.)"""
    journal = SafepointJournal(conversations)  # the one line: every call recorded, replayed on resume
    agent = Agent(
        FunctionModel(counted),
        name="support",
        instructions="Answer briefly.",
        capabilities=[journal],
    )
    conversation = await conversations.load(conversation_id) or Conversation(conversation_id=conversation_id)
    result = await agent.run(prompt, conversation=conversation)
    if crash:
        return "(the process died before saving)"
    await conversations.save(result, scope="user-42")
    return str(result.output)


async def main(url: str) -> None:
    # 1. The one-line switch: a SafepointConversationStore where InMemoryConversationStore was.
    store = safepoint.open_store(url)
    conversations = SafepointConversationStore(store)
    print("turn 1:", await chat(conversations, "support-7", "My name is Ada."))
    store.close()  # the process may stop here: nothing is lost

    # 2. Later, in any process with the same store, the conversation goes on.
    store = safepoint.open_store(url)
    conversations = SafepointConversationStore(store)
    print("turn 2:", await chat(conversations, "support-7", "What is my name?"))
    print(
        "counters:", {k: v for k, v in store.load("pydantic-ai/support-7").counters.items() if "tokens" in k}
    )

    # 3. A fork shares the first turn by reference: its run stores only what it adds.
    await conversations.fork("support-7", at=2, new_conversation_id="support-7-retry")
    print("fork:", await chat(conversations, "support-7-retry", "Who am I?"))
    # 4. A crash after the model answered, before the save: the same call finishes the turn, its
    #    response replayed from the journal (not asked again), each message stored once.
    print("turn 3:", await chat(conversations, "support-7", "Thanks!", crash=True))
    asked = ASKED["model"]
    print("turn 3 again:", await chat(conversations, "support-7", "Thanks!"))
    print("model requests made for it:", ASKED["model"] - asked)
    listed = await conversations.list_conversations(scope="user-42")
    print("conversations:", sorted(record.conversation_id for record in listed))
    print("messages stored per step:", [h.message_count for h in store.history("pydantic-ai/support-7")])
    fork = store.load("pydantic-ai/support-7-retry")
    print("messages the fork stored:", len(fork.messages), "- it reads the rest from", fork.parent)
    store.close()


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "sqlite:///.safepoint/pydantic-ai-example.db"
    if target.startswith("sqlite:///") and not target.startswith("sqlite:////"):
        Path(target.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(target))
