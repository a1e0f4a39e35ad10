"""A Pydantic AI conversation for the crash kit: ``run(store, run_id, ledger, turns=4)``.

Each turn loads the conversation through ``SafepointConversationStore``, runs a
real ``Agent`` on an offline ``FunctionModel`` and saves what it added; a
process started again after a kill goes on from the turns the store holds.
The conversation is the kit's run (``run_id_for``).

Pydantic AI stamps runs, entries and revisions with random ids and the clock.
The kit compares a killed run's final checkpoint with an uninterrupted one's,
so this entry makes them deterministic: the clock is frozen, the agent's run
ids are named by turn, and the ids the conversation store mints come from a
counter that restarts at each turn (a turn redone after a kill mints the same
ones). Only the conversation run's saves are shown to the kit: the adapter's
index runs are bookkeeping, which the kit's step counting must not see.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import uuid
from typing import Any

import pydantic_ai._utils
import pydantic_ai.conversation_store
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from safepoint import Store
from safepoint.adapters.pydantic_ai import SafepointConversationStore
from safepoint.testing.crash import Ledger

CONVERSATION = "crash-chat"
FROZEN = _dt.datetime(2025, 6, 1, 12, 0, tzinfo=_dt.UTC)


class _FrozenClock(_dt.datetime):
    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return FROZEN if tz is not None else FROZEN.replace(tzinfo=None)


class _Minted:
    """Ids from a counter: ``turn`` picks the range, so a redone turn mints the same ids."""

    def __init__(self) -> None:
        self.turn, self.count = 0, 0

    def start(self, turn: int) -> None:
        self.turn, self.count = turn, 0

    def __call__(self) -> uuid.UUID:
        self.count += 1
        return uuid.UUID(int=(self.turn + 1) << 64 | self.count)


MINTED = _Minted()
pydantic_ai._utils.datetime = _FrozenClock  # type: ignore[misc]  # now_utc() reads this module global
pydantic_ai.conversation_store.uuid7 = MINTED  # type: ignore[assignment]
pydantic_ai.conversation_store.now_utc = lambda: FROZEN


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    del info
    prompts = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
    response = ModelResponse(parts=[TextPart(f"reply {len(prompts)} to {prompts[-1]}")])
    if hasattr(response, "duration"):  # newer releases time each response: fixed, as the clock is
        response.duration = _dt.timedelta(0)
    return response


def _kit_sees_only(store: Store, run_id: str) -> None:
    """The kit watches ``store.save``; let it see the conversation run's saves only."""
    observed, plain = store.save, type(store).save

    def save(checkpoint: Any, **kwargs: Any) -> Any:
        if checkpoint.run_id == run_id:
            return observed(checkpoint, **kwargs)
        return plain(store, checkpoint, **kwargs)

    store.save = save  # type: ignore[method-assign]


def run(store: Store, run_id: str, ledger: Ledger, turns: int = 4) -> dict[str, Any]:
    del ledger  # no side effects: the conversation is the whole outcome
    _kit_sees_only(store, run_id)
    conversations = SafepointConversationStore(store, run_id_for=lambda cid: run_id)
    return asyncio.run(_chat(conversations, turns))


async def _chat(conversations: SafepointConversationStore, turns: int) -> dict[str, Any]:
    agent = Agent(FunctionModel(model))
    conversation = await conversations.load(CONVERSATION) or Conversation(conversation_id=CONVERSATION)
    done = sum(isinstance(p, UserPromptPart) for m in conversation.messages for p in m.parts)
    for turn in range(done, turns):
        result = await agent.run(f"question {turn}", conversation=conversation, run_id=f"turn-{turn}")
        MINTED.start(turn)
        await conversations.save(result)
        conversation = result.conversation
    entries = await conversations.load_entries(CONVERSATION) or []
    return {"entries": [[e.id, e.parent_id, str(e.message.parts[0])[:80]] for e in entries]}
