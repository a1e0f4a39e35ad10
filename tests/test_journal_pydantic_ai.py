"""The Pydantic AI call journal (``SafepointJournal``): replay, divergence, reconcile, holding, counters.

A real ``Agent`` on the offline shop (``helpers/pai_journal_agent.py``), a
real SQLite store; a cut turn is the same turn run again without a save.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation

import safepoint
from helpers import pai_journal_agent as shop
from safepoint import Reconcile, RunHeld
from safepoint.adapters.pydantic_ai import SafepointConversationStore, SafepointJournal
from safepoint.journal import ActionWaiting
from safepoint.testing.crash import Ledger

HOSTILE = 'chat\x00|pai|s0|{"$secret": "X"}<b>' + "é" * 300


@pytest.fixture
def shop_ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger(tmp_path / "ledger.db")
    shop.LEDGER["ledger"] = ledger
    return ledger


@pytest.fixture
def conversations(tmp_path: Path) -> SafepointConversationStore:
    return SafepointConversationStore(safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}"))


async def turn(
    conversations: SafepointConversationStore, journal: Any, cid: str, *, save: bool = True
) -> Any:
    """The app's three lines: load (or start), run the next prompt, save."""
    conversation = await conversations.load(cid) or Conversation(conversation_id=cid)
    prompts = sum(p.part_kind == "user-prompt" for m in conversation.messages for p in m.parts)
    result = await shop.build(journal).run(f"order {prompts}", conversation=conversation)
    if save:
        await conversations.save(result)
    return result


def test_a_cut_turn_run_again_replays_every_call(conversations: Any, shop_ledger: Ledger) -> None:
    """A turn run again without a save (a crash) makes no model request and no tool call again,
    answers the same, and the save stores each message once; fresh agent and journal objects."""

    async def go() -> None:
        first = SafepointJournal(conversations)
        await turn(conversations, first, "c", save=False)  # cut: never saved
        again = SafepointJournal(conversations)
        result = await turn(conversations, again, "c")
        assert result.output == shop.answer(0)
        assert again.last_turn is not None
        assert (again.last_turn.models.called, again.last_turn.models.replayed) == (0, 3)
        assert (again.last_turn.tools.called, again.last_turn.tools.replayed) == (0, 3)
        loaded = await conversations.load("c")
        assert loaded is not None
        assert len(loaded.messages) == 6

    asyncio.run(go())
    assert shop_ledger.check_calls() == (3, 3)  # every effect and request once


def test_counters_count_each_recorded_call_once(conversations: Any, shop_ledger: Ledger) -> None:
    """The conversation's saves carry tokens and calls from the journal: a replayed turn adds
    nothing twice; spend is the user's price."""

    async def go() -> dict[str, Any]:
        journal = SafepointJournal(conversations, price=lambda usage: usage.input_tokens / 1000)
        await turn(conversations, journal, "c", save=False)
        await turn(conversations, journal, "c")
        await turn(conversations, journal, "c")
        return dict(conversations.store.load(conversations.run_id("c")).counters)  # type: ignore[union-attr]

    counters = asyncio.run(go())
    paid = [e.value for e in shop_ledger.calls() if e.kind == "model"]
    assert counters["model_calls"] == 6
    assert counters["tool_calls"] == 6
    assert counters["tokens_in"] == sum(v["tokens_in"] for v in paid)
    assert counters["tokens_out"] == sum(v["tokens_out"] for v in paid)
    assert counters["spend"] == pytest.approx(sum(v["tokens_in"] for v in paid) / 1000)
    assert counters["resent_calls"] == 0


def test_a_changed_prompt_is_not_replayed(conversations: Any, shop_ledger: Ledger) -> None:
    """The same place asked something else: called again, counted as a divergence."""

    async def go() -> None:
        journal = SafepointJournal(conversations)
        await turn(conversations, journal, "c", save=False)
        conversation = Conversation(conversation_id="c")
        result = await shop.build(journal).run("order 1", conversation=conversation)  # not order 0
        assert result.output == shop.answer(1)
        assert journal.last_turn is not None
        assert journal.last_turn.models.divergences >= 1
        assert journal.last_turn.models.replayed == 0

    asyncio.run(go())


@pytest.mark.parametrize("decision", ["rerun", "skip", "wait"])
def test_a_charge_found_in_flight_goes_to_its_reconcile_hook(
    conversations: Any, shop_ledger: Ledger, decision: str
) -> None:
    """A non-idempotent tool with an intent and no result (the crash came mid-call): rerun pays
    again, skip takes the hook's answer, wait stops the run with ActionWaiting."""
    hook = {"rerun": Reconcile.rerun(), "skip": Reconcile.skip("charged 2"), "wait": Reconcile.wait()}[
        decision
    ]

    async def go() -> Any:
        journal = SafepointJournal(conversations, non_idempotent={"charge": hook})
        store, run_id = conversations.store, conversations.run_id("c")
        # The run's first step, then the intent a crashed process left for the second charge.
        store.save(_first_step(run_id))
        key = "pai|s0|m0|tool:shop:charge|t0-charge-2"
        store.call_intent(run_id, key, request={"tool": "charge", "args": {"amount": 2}})
        return await turn(conversations, journal, "c")

    if decision == "wait":
        with pytest.raises(ActionWaiting):
            asyncio.run(go())
        assert shop_ledger.counts().get("charge:2") is None
        return
    result = asyncio.run(go())
    assert result.output == shop.answer(0)
    assert shop_ledger.counts().get("charge:2") == (1 if decision == "rerun" else None)


def _first_step(run_id: str) -> safepoint.Checkpoint:
    cp = safepoint.Checkpoint(run_id=run_id, step=0)
    cp.state = {"record": None, "refs": []}
    return cp


def test_a_second_holder_waits_then_gives_up(conversations: Any, shop_ledger: Ledger) -> None:
    """While another live owner holds the conversation's run, a turn waits (``wait``), then
    RunHeld; nothing was called."""
    store, run_id = conversations.store, conversations.run_id("c")
    store.save(_first_step(run_id))
    lease = store.hold_run(run_id, "someone-else-alive", lease=30)
    journal = SafepointJournal(conversations, wait=0.2)
    with pytest.raises(RunHeld):
        asyncio.run(turn(conversations, journal, "c"))
    assert shop_ledger.model_calls() == 0
    store.release_hold(lease)
    assert asyncio.run(turn(conversations, journal, "c")).output == shop.answer(0)


def test_hostile_conversation_ids_and_sync_runs(conversations: Any, shop_ledger: Ledger) -> None:
    """A conversation id full of markers, controls and length, run with run_sync on a reused
    agent: keys stay bounded, the turn replays, the id comes back exactly."""
    journal = SafepointJournal(conversations)
    agent = shop.build(journal)
    cid = HOSTILE
    agent.run_sync("order 0", conversation=Conversation(conversation_id=cid))  # cut
    result = agent.run_sync("order 0", conversation=Conversation(conversation_id=cid))
    assert journal.last_turn is not None
    assert journal.last_turn.models.called == 0
    asyncio.run(conversations.save(result))
    loaded = asyncio.run(conversations.load(cid))
    assert loaded is not None
    assert loaded.conversation_id == cid
    assert len(loaded.messages) == 6
    assert shop_ledger.check_calls() == (3, 3)


def test_without_a_conversation_store_the_journal_records_in_the_store(
    tmp_path: Path, shop_ledger: Ledger
) -> None:
    """Given a plain Store, a turn records under the conversation's default run."""
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'plain.db'}")
    journal = SafepointJournal(store)
    agent = shop.build(journal)
    for _ in range(2):
        agent.run_sync("order 0", conversation=Conversation(conversation_id="plain"))
    assert journal.last_turn is not None
    assert journal.last_turn.models.replayed == 3
    with pytest.raises(safepoint.InvalidArgument):
        SafepointJournal("sqlite:///nope.db")  # type: ignore[arg-type]
