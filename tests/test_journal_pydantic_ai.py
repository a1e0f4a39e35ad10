"""The Pydantic AI call journal (``SafepointJournal``): replay, divergence, reconcile, holding, counters.

A real ``Agent`` on the offline shop (``helpers/pai_journal_agent.py``), a
real SQLite store; a cut turn is the same turn run again without a save.
Covered: ``run``, ``run_sync``, ``run_stream`` and ``iter``; function and
dynamic toolsets, a capability's ``@durable_operation``, an agent a tool
runs; reconcile rerun/skip/wait and an async hook; a second holder; fresh
and reused journals; counters and spend; hostile ids; typed errors; a
``Store`` and an ``AsyncStore``, SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, FunctionToolset, RunContext
from pydantic_ai.capabilities import AbstractCapability, durable_operation
from pydantic_ai.conversation import Conversation
from pydantic_ai.exceptions import RetryModelRequest
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import DynamicToolset
from pydantic_ai.usage import RequestUsage

import safepoint
from helpers import pai_journal_agent as shop
from safepoint import Reconcile, RunHeld
from safepoint.adapters.pydantic_ai import (
    SafepointConversationStore,
    SafepointJournal,
    current_call_key,
    non_idempotent,
)
from safepoint.journal import ActionWaiting, resends
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


def _counters(conversations: SafepointConversationStore, cid: str) -> dict[str, Any]:
    head = conversations.store.load(conversations.run_id(cid))
    assert head is not None
    return dict(head.counters)


def test_a_streamed_turn_is_recorded_whole_and_a_cut_stream_is_sent_again(
    conversations: Any, shop_ledger: Ledger
) -> None:
    """``run_stream``: each complete streamed response is recorded; a stream broken midway is in
    flight — the turn run again replays the two complete ones and sends the broken one again
    (counted as re-sent, its usage apart). ``iter`` then replays the whole turn, each response
    arriving as one; the save counts each response once."""

    async def go() -> None:
        journal = SafepointJournal(conversations)
        agent = shop.build(journal)
        shop.CUT_STREAM["next"] = True
        with pytest.raises(ConnectionError):
            async with agent.run_stream("order 0", conversation=Conversation(conversation_id="c")) as cut:
                await cut.get_output()
        assert journal.last_turn is not None
        assert (journal.last_turn.models.called, journal.last_turn.tools.called) == (2, 3)
        run_id = conversations.run_id("c")
        notes: list[list[str]] = []  # the re-send is noted before it is sent: a kill now still counts
        shop.ON_REQUEST.append(
            lambda turn, step: notes.append(
                [e.key for e in conversations.store.recorded_calls(run_id) if resends.sent_key(e.key)]
            )
        )
        try:
            async with agent.run_stream(
                "order 0", conversation=Conversation(conversation_id="c")
            ) as streamed:
                assert await streamed.get_output() == shop.answer(0)
        finally:
            shop.ON_REQUEST.clear()
        assert [len(keys) for keys in notes] == [1]
        assert notes[0][0].startswith("pai|s0|m0|model#2!resent:")
        models = journal.last_turn.models
        assert (models.replayed, models.resent, models.called) == (2, 1, 1)
        assert journal.last_turn.tools.replayed == 3
        async with agent.iter("order 0", conversation=Conversation(conversation_id="c")) as run:
            async for _ in run:
                pass
        assert run.result is not None
        assert run.result.output == shop.answer(0)
        assert (journal.last_turn.models.replayed, journal.last_turn.models.called) == (3, 0)
        await conversations.save(run.result)

    asyncio.run(go())
    assert shop_ledger.counts(("model",)) == {"t0:s0": 1, "t0:s1": 1, "t0:s2": 2}  # the broken one twice
    assert shop_ledger.check_calls(resent=1) == (3, 4)
    counters = _counters(conversations, "c")
    assert (counters["model_calls"], counters["tool_calls"], counters["resent_calls"]) == (3, 3, 1)
    assert counters["lost_tokens_out_estimate"] > 0  # the re-sent stream's own usage, kept apart


def test_a_dynamic_toolset_and_a_capability_operation_are_journaled(
    conversations: Any, shop_ledger: Ledger
) -> None:
    """Tools from a ``DynamicToolset`` (resolved per run step) and a capability's
    ``@durable_operation`` are recorded and replayed like the shop's own tools: the cut turn run
    again calls nothing; the operations are tallied apart from tool calls."""

    @dataclass
    class Audit(AbstractCapability[Any]):
        id: str | None = "audit"

        @durable_operation(name="note")
        async def note(self, ctx: RunContext[Any], what: str) -> str:
            shop_ledger.record(f"audit:{what}:{ctx.run_step}", what)
            return f"noted {what}"

        async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
            assert await self.note(ctx, "request") == "noted request"
            return request_context

    def tools(ctx: RunContext[Any]) -> Any:
        del ctx
        return shop.toolset()

    async def go() -> SafepointJournal[Any]:
        journal = SafepointJournal(conversations)
        for _ in range(2):  # cut, then run again
            agent = shop.build(
                journal, toolsets=[DynamicToolset(tools, id="counter")], capabilities=[Audit()]
            )
            result = await agent.run("order 0", conversation=Conversation(conversation_id="c"))
            assert result.output == shop.answer(0)
        return journal

    last = asyncio.run(go()).last_turn
    assert last is not None
    assert (last.models.called, last.tools.called, last.operations.called) == (0, 0, 0)
    assert [key.split("|")[-2] for key in last.tools.keys] == [
        "tool:counter:lookup",
        *["tool:counter:charge"] * 2,
    ]
    assert last.operations.replayed == 3
    assert shop_ledger.check_calls() == (6, 3)  # 3 tool effects and 3 notes, each once


def test_an_async_reconcile_hook_decides(conversations: Any, shop_ledger: Ledger) -> None:
    """A reconcile hook may be a coroutine function: it is awaited, given the journal key and the
    tool's own arguments; its skip's result is the tool's answer."""
    asked: list[tuple[str, str, Any]] = []

    async def settled(key: str, tool: str, args: Any) -> Reconcile:
        asked.append((key, tool, args))
        await asyncio.sleep(0)
        return Reconcile.skip(f"charged {args['amount']}")

    store, run_id = conversations.store, conversations.run_id("c")
    store.save(_first_step(run_id))
    key = "pai|s0|m0|tool:shop:charge|t0-charge-2"
    store.call_intent(run_id, key, request={"tool": "charge", "args": {"amount": 2}})
    journal = SafepointJournal(conversations, non_idempotent={"charge": settled})
    result = asyncio.run(turn(conversations, journal, "c"))
    assert result.output == shop.answer(0)
    assert asked == [(key, "charge", {"amount": 2})]
    assert shop_ledger.counts().get("charge:2") is None
    assert journal.last_turn is not None
    assert (journal.last_turn.tools.reconciled, journal.last_turn.tools.skipped) == (1, 1)
    assert _counters(conversations, "c")["tool_calls"] == 3  # the skipped call counted once


def test_fresh_and_reused_journals_record_the_same(conversations: Any, shop_ledger: Ledger) -> None:
    """Three turns with one journal and agent reused across them, and three with a fresh journal
    and agent each turn: the same answers, history, keys and counters."""

    async def go() -> None:
        reused = SafepointJournal(conversations)
        for _ in range(3):
            await turn(conversations, reused, "reused")
            await turn(conversations, SafepointJournal(conversations), "fresh")

    asyncio.run(go())
    runs = {cid: conversations.run_id(cid) for cid in ("reused", "fresh")}
    # sorted: two tools the model asked for at once finish in either order
    keys = {cid: sorted(e.key for e in conversations.store.recorded_calls(run)) for cid, run in runs.items()}
    assert keys["reused"] == keys["fresh"]
    assert len(keys["fresh"]) == 18
    assert _counters(conversations, "reused") == _counters(conversations, "fresh")
    loaded = [asyncio.run(conversations.load(cid)) for cid in runs]
    assert [[part.part_kind for m in c.messages for part in m.parts] for c in loaded if c] == [
        [part.part_kind for m in loaded[1].messages for part in m.parts]  # type: ignore[union-attr]
    ] * 2


def test_spend_is_the_users_price_or_the_cost_the_framework_reports(tmp_path: Path) -> None:
    """Tokens come from each response's own usage; spend from ``price`` when given, else from the
    ``cost`` Pydantic AI reports in that usage, else 0 — never from a price table."""

    def billed(messages: list[Any], info: Any) -> ModelResponse:
        del messages, info
        usage = RequestUsage(input_tokens=120, output_tokens=30, cost=Decimal("0.0042"))
        return ModelResponse(parts=[TextPart("ok")], usage=usage, model_name="billed")

    def unpriced(messages: list[Any], info: Any) -> ModelResponse:
        del messages, info
        return ModelResponse(parts=[TextPart("ok")], usage=RequestUsage(input_tokens=7, output_tokens=3))

    store = safepoint.open_store(f"sqlite:///{tmp_path / 'spend.db'}")
    conversations = SafepointConversationStore(store)
    cases = {
        "price": (billed, lambda usage: usage.input_tokens * 1e-5 + usage.output_tokens * 3e-5, 0.0021),
        "reported": (billed, None, 0.0042),
        "none": (unpriced, None, 0.0),
    }

    async def go() -> None:
        for cid, (model, price, _) in cases.items():
            journal = SafepointJournal(conversations, price=price)
            agent = Agent(FunctionModel(model), name="billing", capabilities=[journal])
            await conversations.save(await agent.run("hi", conversation=Conversation(conversation_id=cid)))

    asyncio.run(go())
    for cid, (model, _, spend) in cases.items():
        counters = _counters(conversations, cid)
        assert counters["spend"] == pytest.approx(spend)
        assert (counters["tokens_in"], counters["tokens_out"]) == ((120, 30) if model is billed else (7, 3))


def test_bad_input_is_a_typed_error_that_does_not_quote_it(conversations: Any, shop_ledger: Ledger) -> None:
    """Options that cannot work raise InvalidArgument when the journal is made, naming the option,
    never quoting the value; a price that returns no number stops the turn the same way."""
    secret = "sk-do-not-echo"
    bad: list[dict[str, Any]] = [
        {"non_idempotent": {"charge": secret}},
        {"non_idempotent": [secret]},
        {"non_idempotent": {"": Reconcile.rerun()}},
        {"hold": 0},
        {"wait": float("nan")},
        {"hold": secret},
        {"price": secret},
    ]
    for options in bad:
        with pytest.raises(safepoint.InvalidArgument) as raised:
            SafepointJournal(conversations, **options)
        assert secret not in str(raised.value)
        assert isinstance(raised.value, safepoint.SafepointError)
    with pytest.raises(safepoint.InvalidArgument):
        non_idempotent(reconcile=secret)  # type: ignore[arg-type]
    journal = SafepointJournal(conversations, price=lambda usage: secret)
    with pytest.raises(safepoint.InvalidArgument) as raised:
        asyncio.run(turn(conversations, journal, "c"))
    assert secret not in str(raised.value)


def test_tool_call_ids_that_look_like_keys_stay_tool_calls(conversations: Any, shop_ledger: Ledger) -> None:
    """A model gives tool-call ids that read as the journal's own key parts (``x|resent``,
    ``y|model#0``, a ``%7C``, a re-send's ``!resent:``): each stays its tool's key, the cut turn
    replays, and the counters count two tool calls, two model calls and nothing re-sent."""
    ids = ["x|resent!resent:w", "y|model#0%7C!resent:"]

    def tricky(messages: list[Any], info: Any) -> ModelResponse:
        del info
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("lookup", {"item": "i"}, tool_call_id=ids[0]),
                    ToolCallPart("charge", {"amount": 5}, tool_call_id=ids[1]),
                ],
                usage=RequestUsage(input_tokens=3, output_tokens=2),
            )
        return ModelResponse(parts=[TextPart("done")], usage=RequestUsage(input_tokens=4, output_tokens=1))

    async def go() -> SafepointJournal[Any]:
        journal = SafepointJournal(conversations)
        agent = Agent(FunctionModel(tricky), name="shop", toolsets=[shop.toolset()], capabilities=[journal])
        await agent.run("hi", conversation=Conversation(conversation_id="c"))  # cut
        await conversations.save(await agent.run("hi", conversation=Conversation(conversation_id="c")))
        return journal

    last = asyncio.run(go()).last_turn
    assert last is not None
    assert (last.tools.called, last.tools.replayed, last.models.replayed) == (0, 2, 2)
    counters = _counters(conversations, "c")
    assert (counters["model_calls"], counters["tool_calls"], counters["resent_calls"]) == (2, 2, 0)
    assert (counters["tokens_in"], counters["tokens_out"]) == (7, 3)
    assert shop_ledger.counts() == {"lookup:i": 1, "charge:5": 1}


def test_an_agent_a_tool_runs_is_part_of_that_call(conversations: Any, shop_ledger: Ledger) -> None:
    """A tool that runs another agent (with the journal too, on a conversation of its own): the
    inner run opens no turn of its own — it is part of the tool's call, recorded with it, and
    replayed with it: the cut turn run again asks neither model anything."""

    async def inner_model(
        messages: list[Any], info: Any
    ) -> ModelResponse:  # async: the ledger is this thread's
        del messages, info
        shop_ledger.model("inner", {"tokens_in": 1, "tokens_out": 1})
        return ModelResponse(
            parts=[TextPart("in stock")], usage=RequestUsage(input_tokens=1, output_tokens=1)
        )

    async def go() -> SafepointJournal[Any]:
        journal = SafepointJournal(conversations)
        inner = Agent(
            FunctionModel(inner_model), name="clerk", capabilities=[SafepointJournal(conversations)]
        )
        tools = FunctionToolset[Any](id="desk")

        @tools.tool_plain
        async def ask_clerk(item: str) -> str:
            run = await inner.run(f"is {item} in stock?", conversation=Conversation(conversation_id="clerk"))
            return run.output

        async def outer_model(messages: list[Any], info: Any) -> ModelResponse:
            del info
            shop_ledger.model(f"outer:{len(messages)}", {"tokens_in": 2, "tokens_out": 2})
            if len(messages) == 1:
                parts: list[Any] = [ToolCallPart("ask_clerk", {"item": "tea"}, tool_call_id="c1")]
            else:
                parts = [TextPart("tea is in stock")]
            return ModelResponse(parts=parts, usage=RequestUsage(input_tokens=2, output_tokens=2))

        agent = Agent(FunctionModel(outer_model), name="desk", toolsets=[tools], capabilities=[journal])
        for _ in range(2):  # cut, then run again
            result = await agent.run("tea?", conversation=Conversation(conversation_id="c"))
            assert result.output == "tea is in stock"
        return journal

    last = asyncio.run(go()).last_turn
    assert last is not None
    assert (last.models.called, last.tools.replayed) == (0, 1)
    assert shop_ledger.counts(("model",)) == {"outer:1": 1, "inner": 1, "outer:3": 1}
    with pytest.raises(safepoint.NotFound):  # the inner run recorded nothing of its own
        conversations.store.load(conversations.run_id("clerk"))


def test_an_attempt_made_again_takes_the_failed_attempts_key(conversations: Any, shop_ledger: Ledger) -> None:
    """A request that failed and that a capability attempts again (``RetryModelRequest``) is
    recorded under the failed attempt's key, counted as no re-send: the turn run again replays
    every call — nothing sent again, no divergence."""
    failures = {"left": 1}

    async def flaky(messages: list[Any], info: Any) -> ModelResponse:
        if failures["left"]:
            failures["left"] -= 1
            raise ConnectionError("dropped")
        return await shop.script(messages, info)

    @dataclass
    class TryAgain(AbstractCapability[Any]):
        async def on_model_request_error(self, ctx: Any, *, request_context: Any, error: Exception) -> Any:
            raise RetryModelRequest()

    async def go() -> list[Any]:
        journal = SafepointJournal(conversations)
        turns = []
        for _ in range(2):  # cut, then run again
            agent = Agent(
                FunctionModel(flaky),
                name="shop",
                toolsets=[shop.toolset()],
                capabilities=[TryAgain(), journal],
            )
            result = await agent.run("order 0", conversation=Conversation(conversation_id="c"))
            assert result.output == shop.answer(0)
            turns.append(journal.last_turn)
        return turns

    first, again = asyncio.run(go())
    assert (first.models.called, first.models.resent) == (3, 0)
    models = again.models
    assert (models.called, models.replayed, models.resent, models.divergences) == (0, 3, 0, 0)
    assert shop_ledger.check_calls() == (3, 3)


def test_a_tool_sees_its_journal_key_the_same_in_every_process(
    conversations: Any, shop_ledger: Ledger
) -> None:
    """``current_call_key()`` inside a tool is its journal key — the key a crashed process's
    intent carries and its reconcile hook is given — so a service can use it as an idempotency
    key; outside a tool it is None."""
    keys: list[str | None] = []
    tools = FunctionToolset[Any](id="shop")

    @tools.tool_plain
    async def lookup(item: str) -> str:
        return f"{item} in stock"

    @tools.tool_plain(metadata=non_idempotent(reconcile=Reconcile.rerun()))
    async def charge(amount: int) -> str:
        keys.append(current_call_key())
        return f"charged {amount}"

    store, run_id = conversations.store, conversations.run_id("c")
    store.save(_first_step(run_id))
    cut = "pai|s0|m0|tool:shop:charge|t0-charge-2"  # a crashed process's charge, in flight
    store.call_intent(run_id, cut, request={"tool": "charge", "args": {"amount": 2}})
    journal = SafepointJournal(conversations)
    agent = shop.build(journal, toolsets=[tools])
    result = asyncio.run(agent.run("order 0", conversation=Conversation(conversation_id="c")))
    assert result.output == shop.answer(0)
    assert sorted(keys) == ["pai|s0|m0|tool:shop:charge|t0-charge-1", cut]  # type: ignore[type-var]
    assert current_call_key() is None


@pytest.mark.parametrize("kind", ["sqlite-async", "postgres", "postgres-async"])
def test_a_cut_turn_replays_on_every_store(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, shop_ledger: Ledger
) -> None:
    """The cut turn run again replays every call through an ``AsyncStore`` as through a
    ``Store``, on PostgreSQL as on SQLite; the save counts each call once."""
    url, options = f"sqlite:///{tmp_path / 'async.db'}", {}
    if kind.startswith("postgres"):
        url = request.getfixturevalue("postgres_dsn")
        options = {"schema": request.getfixturevalue("pg_schema"), "max_size": 2}

    async def go() -> dict[str, Any]:
        if kind.endswith("async"):
            store: Any = await safepoint.open_async_store(url, **options)
        else:
            store = safepoint.open_store(url, **options)
        conversations = SafepointConversationStore(store)
        await turn(conversations, SafepointJournal(conversations), "c", save=False)  # cut
        again = SafepointJournal(conversations)
        result = await turn(conversations, again, "c")
        assert result.output == shop.answer(0)
        assert again.last_turn is not None
        assert (again.last_turn.models.called, again.last_turn.tools.called) == (0, 0)
        head = store.load(conversations.run_id("c"))
        head = await head if asyncio.iscoroutine(head) else head
        closing = store.close()
        if asyncio.iscoroutine(closing):
            await closing
        return dict(head.counters)

    counters = asyncio.run(go())
    assert (counters["model_calls"], counters["tool_calls"], counters["resent_calls"]) == (3, 3, 0)
    assert shop_ledger.check_calls() == (3, 3)
