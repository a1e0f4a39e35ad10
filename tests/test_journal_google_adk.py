"""ADK's call journal (``CallJournal``, a plugin) under ADK's real ``Runner`` with the offline
scripted app (``helpers/adk_journal_agent.py``) on real SQLite files: recorded, replayed, held.

A turn here is cut inside the process by an exception raised right after a
tool's effect or in the middle of a model stream (``Crash``), then finished
the documented way: the same message sent to the same session again. The
SIGKILLed version, in real child processes, is
``test_journal_google_adk_crash.py``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import warnings
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.apps import App
from google.adk.events.event import Event
from google.adk.flows.llm_flows import functions as adk_functions
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

import safepoint
from adapter_checks import BACKEND_KINDS, backend_store
from helpers import adk_journal_agent as app
from safepoint import InvalidArgument, Reconcile, RunHeld
from safepoint.adapters.google_adk import CallJournal, SafepointSessionService, non_idempotent, waiting_in
from safepoint.adapters.google_adk import framework as adk_framework
from safepoint.crashrig.ledger import DuplicateEffect, Effect, Ledger
from safepoint.journal import ActionWaiting

USER, SESSION = "ada", "chat"
# Turn 1: triage asks for lookup + charge, then transfers; the specialist looks up + charges, answers.
TURN_1 = {"tokens_in": 42, "tokens_out": 20, "spend": 0.0, "model_calls": 4, "tool_calls": 5}


class Crash(RuntimeError):
    """What cuts a turn here (an exception, so ADK's error callbacks see the turn end)."""


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "ledger.db") as opened:
        app.LEDGER["ledger"] = opened
        yield opened
    app.LEDGER["ledger"] = None


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    with safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}") as opened:
        yield opened


class PerThread:
    """The ledger as ``runner.run`` needs it: ADK runs the app in a thread of its own, and a SQLite
    connection serves the thread that opened it — one per thread, on the same file, one hook."""

    def __init__(self, main: Ledger) -> None:
        self.main, self.local, self.opened = main, threading.local(), [main]

    def __getattr__(self, name: str) -> Any:
        own = getattr(self.local, "ledger", None)
        if own is None:
            own = Ledger(
                self.main.path, on_effect=lambda effect: self.main.on_effect and self.main.on_effect(effect)
            )
            self.local.ledger = own
            self.opened.append(own)
        return getattr(own, name)


def crash_after(ledger: Ledger, key: str) -> None:
    """Cut the turn right after the effect ``key`` (made, its result not yet kept)."""

    def hook(effect: Effect) -> None:
        if effect.key == key:
            ledger.on_effect = None
            raise Crash(key)

    ledger.on_effect = hook


def message(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


class Chat:
    """One session's runner, as an app builds it: a service on ``store``, the journal as a plugin."""

    def __init__(
        self,
        store: Any,
        journal: CallJournal | None,
        *,
        agent: Any = None,
        ids: tuple[str, str, str] = (app.APP, USER, SESSION),
    ) -> None:
        self.store, self.journal, self.ids = store, journal, ids
        self.service = SafepointSessionService(store)
        plugins = [journal] if journal is not None else []
        agent = agent or app.build()
        if ids[0] == app.APP:  # the one line, as the docs show it
            self.runner = Runner(
                app=App(name=ids[0], root_agent=agent, plugins=plugins), session_service=self.service
            )
        else:  # App checks its name is an identifier: any other goes the older way
            with warnings.catch_warnings(category=DeprecationWarning, action="ignore"):
                self.runner = Runner(
                    agent=agent, app_name=ids[0], session_service=self.service, plugins=plugins
                )
        self.run_id = self.service.run_id_of(*ids)

    def again(self, journal: CallJournal | None, *, agent: Any = None) -> Chat:
        """The same session from fresh objects (as another process would build them)."""
        return Chat(self.store, journal, agent=agent, ids=self.ids)

    async def create(self) -> None:
        await self.service.create_session(app_name=self.ids[0], user_id=self.ids[1], session_id=self.ids[2])

    async def send(self, text: str, *, stream: bool = False) -> list[Event]:
        config = RunConfig(streaming_mode=StreamingMode.SSE if stream else StreamingMode.NONE)
        return [
            event
            async for event in self.runner.run_async(
                user_id=self.ids[1], session_id=self.ids[2], new_message=message(text), run_config=config
            )
        ]

    def send_sync(self, text: str) -> list[Event]:
        return list(self.runner.run(user_id=self.ids[1], session_id=self.ids[2], new_message=message(text)))

    async def events(self) -> list[Any]:
        session = await SafepointSessionService(self.store).get_session(
            app_name=self.ids[0], user_id=self.ids[1], session_id=self.ids[2]
        )
        assert session is not None
        return [
            [e.author, e.model_dump(mode="json", exclude_none=True, include={"content"}).get("content")]
            for e in session.events
        ]

    def counters(self) -> dict[str, Any]:
        return dict(self.store.load(self.run_id).counters)

    def entry_keys(self) -> list[str]:
        return [entry.key for entry in self.store.recorded_calls(self.run_id)]


def counted(counters: dict[str, Any]) -> dict[str, Any]:
    return {name: counters[name] for name in TURN_1}


async def reference_events(tmp_path: Path, turns: list[str]) -> list[Any]:
    """The session's events after ``turns`` sent once each, uninterrupted, on a store of its own."""
    with (
        Ledger(tmp_path / "reference-ledger.db") as ledger,
        safepoint.open_store(f"sqlite:///{tmp_path / 'reference.db'}") as store,
    ):
        app.LEDGER["ledger"], kept = ledger, app.LEDGER["ledger"]
        chat = Chat(store, CallJournal())
        await chat.create()
        for text in turns:
            await chat.send(text)
        app.LEDGER["ledger"] = kept
        return await chat.events()


def test_the_adk_names_the_journal_relies_on_are_there() -> None:
    """framework.py's names exist and mean what the journal takes them to mean."""
    assert adk_framework.CLIENT_ID_PREFIX == adk_functions.AF_FUNCTION_CALL_ID_PREFIX
    assert callable(getattr(adk_framework.BasePlugin, "before_model_callback", None))
    context = type("Context", (), {"get_invocation_context": lambda self: "invocation"})()
    assert adk_framework.invocation_of(context) == "invocation"


@pytest.mark.parametrize(
    ("mode", "fresh"), [("run_async", True), ("run_async", False), ("run", True), ("run", False)]
)
def test_a_turn_cut_mid_way_resumes_with_every_recorded_call_replayed(
    mode: str, fresh: bool, tmp_path: Path, store: Any, ledger: Ledger
) -> None:
    """Cut right after the specialist's charge: the same message again (fresh objects, or the same
    runner and journal) replays the 3 recorded responses and the tool results recorded before the
    cut — ADK requests none of them again — settles the charge in flight with its hook (it
    happened: skipped), and the session ends with the uninterrupted run's events, each once, and
    its counters."""
    if mode == "run":
        app.LEDGER["ledger"] = PerThread(ledger)  # type: ignore[assignment]
    journal = CallJournal()
    chat = Chat(store, journal)
    asyncio.run(chat.create())
    crash_after(ledger, "charge:7")
    with pytest.raises(Crash):
        chat.send_sync("ask:1") if mode == "run" else asyncio.run(chat.send("ask:1"))
    assert ledger.model_calls() == 3
    cut = chat.counters()["events"]  # the message and what the cut turn saved (ADK's error event too)

    again = chat.again(CallJournal()) if fresh else chat
    events = again.send_sync("ask:1") if mode == "run" else asyncio.run(again.send("ask:1"))
    assert events[-1].content is not None
    assert events[-1].content.parts[0].text == app.answer(1)
    turn = again.journal.last_turn if again.journal else None
    assert turn is not None
    assert (turn.number, turn.resumed, turn.rolled_back) == (1, True, cut)
    assert (turn.models.replayed, turn.models.called, turn.models.resent) == (3, 1, 0)
    assert (turn.tools.reconciled, turn.tools.skipped) == (1, 1)
    # The specialist's lookup runs beside the charge: the cut may come before it recorded its
    # result (then, idempotent, it is simply run again) or after (replayed); never anything else.
    assert turn.tools.replayed + turn.tools.called == 4
    assert turn.tools.called <= 1
    assert ledger.check_calls() == (4, 4)  # each effect once, each model request paid once
    assert asyncio.run(chat.events()) == asyncio.run(reference_events(tmp_path, ["ask:1"]))
    assert counted(chat.counters()) == TURN_1
    ledger.check_usage(chat.counters())
    authors = ["triage"] * 4 + ["specialist"] * 3  # the turn's events, given to the caller as the first time
    assert [event.author for event in events] == authors


@pytest.mark.parametrize("kind", BACKEND_KINDS)
def test_resume_on_every_backend(kind: str, tmp_path: Path, ledger: Ledger) -> None:
    """The cut-and-resumed turn on SQLite and PostgreSQL, through a Store and an AsyncStore."""

    async def scenario() -> None:
        async with backend_store(kind, tmp_path) as store:
            chat = Chat(store, CallJournal())
            await chat.create()
            crash_after(ledger, "charge:7")
            with pytest.raises(Crash):
                await chat.send("ask:1")
            again = chat.again(CallJournal(wait=0))
            events = await again.send("ask:1", stream=True)
            assert events[-1].content is not None
            assert events[-1].content.parts[0].text == app.answer(1)
            turn = again.journal.last_turn if again.journal else None
            assert turn is not None
            assert (turn.resumed, turn.models.replayed, turn.tools.skipped) == (True, 3, 1)
            # The specialist's lookup runs beside the cut charge: replayed, or (in flight at
            # the cut, idempotent) run again — as in the test above; never anything else.
            assert turn.tools.replayed + turn.tools.called == 4
            assert turn.tools.called <= 1

    asyncio.run(scenario())
    assert ledger.check_calls() == (4, 4)


def test_every_session_step_carries_the_counters_and_spend_is_the_users_price(
    store: Any, ledger: Ledger
) -> None:
    """tokens from ADK's usage_metadata, one count per recorded call; spend only from the user's
    ``spend`` callable; every save of the session's run stamped; two turns add up."""
    chat = Chat(store, CallJournal(spend=lambda usage: usage.prompt_token_count * 0.5))
    asyncio.run(chat.create())
    asyncio.run(chat.send("ask:1"))
    asyncio.run(chat.send("ask:2"))  # the specialist answers: 2 calls (10 + 11 in), 2 tools
    counters = chat.counters()
    assert counted(counters) == {
        "tokens_in": 42 + 21,
        "tokens_out": 30,
        "spend": (42 + 21) * 0.5,
        "model_calls": 6,
        "tool_calls": 7,
    }
    assert (counters["resent_calls"], counters["lost_tokens_in_estimate"]) == (0, 0)
    ledger.check_usage(counters)
    steps = list(store.history(chat.run_id))
    stamped = [store.load(chat.run_id, info.step).counters.get("model_calls") for info in steps[1:]]
    assert stamped == sorted(stamped)
    assert stamped[-1] == 6
    assert store.run(chat.run_id).counters["tokens_in"] == 63  # what safepoint runs shows


def test_sse_records_complete_responses_only_and_replays_each_as_one(store: Any, ledger: Ledger) -> None:
    """In SSE streaming the partial chunks pass by: the entries hold complete responses, and a
    resumed streamed turn gives each replayed response back as one complete (non-partial) event."""
    chat = Chat(store, CallJournal())
    asyncio.run(chat.create())
    crash_after(ledger, "charge:7")
    with pytest.raises(Crash):
        asyncio.run(chat.send("ask:1", stream=True))
    recorded = [e for e in store.recorded_calls(chat.run_id) if "|model#" in e.key]
    assert len(recorded) == 3
    assert all(e.state == "done" and not e.result.get("partial") for e in recorded)
    again = chat.again(CallJournal())
    events = asyncio.run(again.send("ask:1", stream=True))
    turn = again.journal.last_turn if again.journal else None
    assert turn is not None
    assert (turn.models.replayed, turn.models.called) == (3, 1)
    partial = [e for e in events if e.partial]
    assert len(partial) == 1  # the one call made: its chunk streams; replayed calls come whole
    assert ledger.check_calls() == (4, 4)


class CutStream(app.ScriptedModel):
    """The scripted model whose first streamed answer is cut after its first chunk."""

    cuts: int = 1

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        async for response in super().generate_content_async(llm_request, stream):
            if self.cuts and response.partial:
                yield response
                self.cuts -= 1
                raise Crash("stream cut")
            yield response


def cut_agent() -> LlmAgent:
    return LlmAgent(
        name="solo",
        instruction="solo",
        tools=[app.lookup],
        model=CutStream(model="solo", script=[[("lookup", {"q": "x{n}"})], "final answer {n}"]),
    )


@pytest.mark.parametrize("fresh", [True, False])
def test_a_cut_stream_is_in_flight_and_a_retried_call_is_not(fresh: bool, store: Any, ledger: Ledger) -> None:
    """A stream cut mid-way records nothing: its intent is in flight. Found by another journal (as
    a new process would) it is sent again and counted (resent, its usage the lost estimate); sent
    again through the journal that saw it fail, it is a retry: one call, nothing counted lost."""
    agent = cut_agent()
    journal = CallJournal()
    chat = Chat(store, journal, agent=agent)
    asyncio.run(chat.create())
    with pytest.raises(Crash):
        asyncio.run(chat.send("ask:1", stream=True))
    assert not [e for e in store.recorded_calls(chat.run_id) if e.state == "done" and "|model#" in e.key]
    again = chat.again(CallJournal() if fresh else journal, agent=agent)
    events = asyncio.run(again.send("ask:1", stream=True))
    assert events[-1].content is not None
    assert events[-1].content.parts[0].text == app.answer(1)
    turn = again.journal.last_turn if again.journal else None
    assert turn is not None
    counters = chat.counters()
    if fresh:
        assert (turn.models.called, turn.models.resent) == (2, 1)
        assert (counters["resent_calls"], counters["lost_tokens_in_estimate"]) == (1, 10)
        ledger.check_usage(counters)  # the cut request was paid: the counters + the lost estimate
    else:
        assert (turn.models.called, turn.models.resent) == (2, 0)
        assert (counters["resent_calls"], counters["lost_tokens_in_estimate"]) == (0, 0)
        assert ledger.repeated_model_calls() == 1  # the failed call and its retry: no crash between
    assert counted(counters) | {"tool_calls": counters["tool_calls"]} == {
        "tokens_in": 21,
        "tokens_out": 10,
        "spend": 0.0,
        "model_calls": 2,
        "tool_calls": 1,
    }


def test_a_re_sent_call_cut_again_counts_each_send(store: Any, ledger: Ledger) -> None:
    """Re-sent after a cut and cut again before anything was saved, then finished by a third run:
    both re-sends are counted (the second run's from the marker it wrote before sending), so the
    counters plus the lost estimate are what the provider was paid."""
    agent = LlmAgent(
        name="solo",
        instruction="solo",
        tools=[app.lookup],
        model=CutStream(model="solo", cuts=2, script=[[("lookup", {"q": "x{n}"})], "final answer {n}"]),
    )
    chat = Chat(store, CallJournal(), agent=agent)
    asyncio.run(chat.create())
    for _ in range(2):
        with pytest.raises(Crash):
            asyncio.run(chat.again(CallJournal(), agent=agent).send("ask:1", stream=True))
    last = chat.again(CallJournal(), agent=agent)
    asyncio.run(last.send("ask:1", stream=True))
    turn = last.journal.last_turn if last.journal else None
    assert turn is not None
    assert (turn.models.resent, turn.lost_before["resent_calls"]) == (1, 1)
    counters = chat.counters()
    assert (counters["resent_calls"], counters["lost_tokens_in_estimate"]) == (2, 20)
    assert ledger.repeated_model_calls() == 2
    assert ledger.check_usage(counters) == {"tokens_in": 20, "tokens_out": 10}


def test_a_changed_request_is_called_again_under_a_key_of_its_own(store: Any, ledger: Ledger) -> None:
    """A turn resumed with the agent's instruction changed: the recorded responses were answers to
    another request — called again, recorded under keys of their own, counted as divergences."""
    chat = Chat(store, CallJournal())
    asyncio.run(chat.create())
    crash_after(ledger, "charge:5")
    with pytest.raises(Crash):
        asyncio.run(chat.send("ask:1"))
    changed = app.build()
    changed.instruction = "triage, but differently"
    again = chat.again(CallJournal(non_idempotent={"charge": Reconcile.skip("charged:5")}), agent=changed)
    asyncio.run(again.send("ask:1"))
    turn = again.journal.last_turn if again.journal else None
    assert turn is not None
    assert turn.models.divergences == 1  # triage's first call; its second was never recorded
    assert turn.models.replayed == 0
    keys = chat.entry_keys()
    first = next(k for k in keys if k.endswith("|triage|model#0"))
    assert any(k.startswith(first + "~") for k in keys)  # the changed request's own entry
    assert store.recorded_call(chat.run_id, first).state == "done"  # the old one, untouched


@pytest.mark.parametrize("decision", ["rerun", "skip", "wait"])
def test_a_non_idempotent_tool_in_flight_goes_to_its_reconcile_hook(
    decision: str, store: Any, ledger: Ledger
) -> None:
    """Its intent written before it ran, the charge cut mid-call is settled by the journal's hook:
    rerun runs it again (the user's call: a second payment), skip records the hook's result, wait
    stops the turn as waiting (``waiting_in``), which a later decision finishes."""
    hooks: dict[str, Any] = {"rerun": Reconcile.rerun(), "skip": Reconcile.skip("charged:5"), "wait": None}
    chat = Chat(store, CallJournal(non_idempotent={"charge": hooks[decision]}))
    asyncio.run(chat.create())
    crash_after(ledger, "charge:5")
    with pytest.raises(Crash):
        asyncio.run(chat.send("ask:1"))
    again = chat.again(CallJournal(non_idempotent={"charge": hooks[decision]}))
    if decision == "wait":
        with pytest.raises(Exception) as stopped:  # noqa: PT011 - ADK may wrap it: waiting_in finds it
            asyncio.run(again.send("ask:1"))
        waiting = waiting_in(stopped.value)
        assert isinstance(waiting, ActionWaiting)
        assert (waiting.tool, waiting.run_id) == ("charge", chat.run_id)
        assert "|triage|tool:charge|" in waiting.key
        assert waiting_in(Crash("other")) is None
        again = chat.again(CallJournal(non_idempotent={"charge": Reconcile.skip("charged:5")}))
    events = asyncio.run(again.send("ask:1"))
    assert events[-1].content is not None
    assert events[-1].content.parts[0].text == app.answer(1)
    turn = again.journal.last_turn if again.journal else None
    assert turn is not None
    assert turn.tools.reconciled == 1
    assert counted(chat.counters()) == TURN_1
    if decision == "rerun":
        assert turn.tools.skipped == 0
        with pytest.raises(DuplicateEffect, match="charge:5 x2"):
            ledger.check_calls()
    else:
        assert turn.tools.skipped == 1
        assert ledger.check_calls() == (4, 4)
        charge = next(k for k in chat.entry_keys() if "|triage|tool:charge|" in k)
        assert store.recorded_call(chat.run_id, charge).result == {"result": "charged:5", "actions": {}}


def test_a_second_holder_of_the_session_waits_then_refuses(store: Any, ledger: Ledger) -> None:
    """While a turn runs (its charge blocked) a second runner on the same session waits for it,
    up to its ``wait``: then ``RunHeld``. Once the first turn ends the second one runs."""

    async def scenario() -> None:
        chat = Chat(store, CallJournal())
        await chat.create()
        entered, release = asyncio.Event(), asyncio.Event()

        async def slow_charge(amount: int) -> str:
            entered.set()
            await release.wait()
            return f"charged:{amount}"

        slow = app.build()
        slow.tools = [app.lookup, non_idempotent(FunctionTool(slow_charge))]
        slow.tools[1].name = "charge"
        first = chat.again(CallJournal(), agent=slow)
        running = asyncio.ensure_future(first.send("ask:1"))
        await entered.wait()
        second = chat.again(CallJournal(wait=0.3))
        with pytest.raises(Exception) as refused:  # noqa: PT011 - ADK may wrap it
            await second.send("ask:2")
        assert held_in(refused.value)
        release.set()
        await running
        await second.send("ask:2")
        turn = second.journal.last_turn if second.journal else None
        assert turn is not None
        assert (turn.number, turn.resumed) == (2, False)

    asyncio.run(scenario())


def test_a_caller_waiting_with_the_same_message_replays_the_turn_it_waited_for(
    tmp_path: Path, store: Any, ledger: Ledger
) -> None:
    """The same message sent by a second runner while the first runs it (a client's retry): it
    waits, then runs the turn again with every call replayed — no call made, no effect again, the
    session holding each event once."""

    async def scenario() -> None:
        chat = Chat(store, CallJournal())
        await chat.create()
        entered, release = asyncio.Event(), asyncio.Event()

        async def charge(amount: int) -> str:
            """Charge money (non-idempotent: every call is a payment)."""
            entered.set()
            await release.wait()
            ledger.record(f"charge:{amount}")
            return f"charged:{amount}"

        slow = app.build()  # the same request as app.charge's: its name, arguments and description
        slow.tools = [app.lookup, non_idempotent(FunctionTool(charge))]
        running = asyncio.ensure_future(chat.again(CallJournal(), agent=slow).send("ask:1"))
        await entered.wait()
        second = chat.again(CallJournal())
        waiting = asyncio.ensure_future(second.send("ask:1"))
        await asyncio.sleep(0.5)  # time to read the open turn and start waiting (a few reads)
        release.set()
        await running
        events = await waiting
        assert events[-1].content is not None
        assert events[-1].content.parts[0].text == app.answer(1)
        turn = second.journal.last_turn if second.journal else None
        assert turn is not None
        assert (turn.number, turn.resumed, turn.models.called, turn.tools.called) == (1, True, 0, 0)
        assert (turn.models.replayed, turn.tools.replayed, turn.models.divergences) == (4, 5, 0)

    asyncio.run(scenario())
    assert ledger.check_calls() == (4, 4)
    assert asyncio.run(Chat(store, None).events()) == asyncio.run(reference_events(tmp_path, ["ask:1"]))


def test_a_long_turn_keeps_its_session_held(store: Any, ledger: Ledger) -> None:
    """The turn's lease is renewed while it runs: past three lease periods a second caller that
    will not wait is still refused (``RunHeld``), and the first turn ends normally, its writes
    still under its lease."""

    async def scenario() -> None:
        chat = Chat(store, CallJournal())
        await chat.create()
        entered, release = asyncio.Event(), asyncio.Event()

        async def charge(amount: int) -> str:
            """Charge money (non-idempotent: every call is a payment)."""
            entered.set()
            await release.wait()
            return f"charged:{amount}"

        slow = app.build()
        slow.tools = [app.lookup, non_idempotent(FunctionTool(charge))]
        first = chat.again(CallJournal(hold=0.6), agent=slow)
        running = asyncio.ensure_future(first.send("ask:1"))
        await entered.wait()
        await asyncio.sleep(1.8)  # three lease periods: without its renewals the lease would be gone
        with pytest.raises(Exception) as refused:  # noqa: PT011 - ADK may wrap it
            await chat.again(CallJournal(wait=0)).send("ask:2")
        assert held_in(refused.value)
        release.set()
        events = await running
        assert events[-1].content is not None
        assert events[-1].content.parts[0].text == app.answer(1)
        assert store.recorded_call(chat.run_id, "turn:1:end") is not None

    asyncio.run(scenario())


def held_in(error: BaseException) -> bool:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, RunHeld):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def test_a_different_message_drops_the_cut_turn(tmp_path: Path, store: Any, ledger: Ledger) -> None:
    """After a cut turn the user says something else: the cut turn is rolled back (its events no
    longer the session's), its end written as dropped, and the new message is turn 2."""
    chat = Chat(store, CallJournal())
    asyncio.run(chat.create())
    crash_after(ledger, "charge:5")
    with pytest.raises(Crash):
        asyncio.run(chat.send("ask:1"))
    again = chat.again(CallJournal())
    asyncio.run(again.send("ask:2"))
    turn = again.journal.last_turn if again.journal else None
    assert turn is not None
    assert (turn.number, turn.resumed) == (2, False)
    assert store.recorded_call(chat.run_id, "turn:1:end").result == {"dropped": True}
    reference = asyncio.run(reference_events(tmp_path, ["ask:2"]))  # there it is turn 1: other call ids
    assert without_call_ids(asyncio.run(chat.events())) == without_call_ids(reference)


def without_call_ids(events: list[Any]) -> list[Any]:
    text = json.dumps(events)
    for call_id in {m for m in text.split('"') if m.startswith(adk_framework.CLIENT_ID_PREFIX)}:
        text = text.replace(call_id, "id")
    return json.loads(text)  # type: ignore[no-any-return]


def test_an_agent_used_as_a_tool_is_one_tool_call(store: Any, ledger: Ledger) -> None:
    """``AgentTool`` runs its agent on a runner of its own (in memory, the journal among its
    plugins): the journal records the whole call as one tool result and, cut after it, replays
    it — the inner agent's model is not asked again."""
    helper = LlmAgent(
        name="helper",
        instruction="help",
        model=app.ScriptedModel(model="helper", script=["helped {n}"]),
    )
    agent = LlmAgent(
        name="solo",
        instruction="solo",
        tools=[AgentTool(helper), app.CHARGE],
        model=app.ScriptedModel(
            model="solo",
            script=[[("helper", {"request": "ask:{n}"})], [("charge", {"amount": 3})], "final answer {n}"],
        ),
    )
    chat = Chat(store, CallJournal(), agent=agent)
    asyncio.run(chat.create())
    crash_after(ledger, "charge:3")
    with pytest.raises(Crash):
        asyncio.run(chat.send("ask:1"))
    paid = ledger.model_calls()
    again = chat.again(CallJournal(), agent=agent)
    events = asyncio.run(again.send("ask:1"))
    assert events[-1].content is not None
    assert events[-1].content.parts[0].text == app.answer(1)
    turn = again.journal.last_turn if again.journal else None
    assert turn is not None
    assert turn.tools.keys[0].split("|")[-2] == "tool:helper"  # replayed: the helper not run
    assert ledger.model_calls() == paid + 1  # only the outer agent's last request
    assert ledger.check_calls() == (1, 4)


HOSTILE = [
    "ünïcødé ☃ 𝄞 — 名前",
    "ctrl \x00\x01\x1f\x7f tab\t nl\n |pipes|~tilde~ /slash/ %25",
    "L" * 3000,
]


@pytest.mark.parametrize("hostile", HOSTILE, ids=["unicode", "control", "long"])
def test_hostile_ids_and_tool_arguments_record_and_replay(hostile: str, store: Any, ledger: Ledger) -> None:
    """Unicode, control characters and very long strings in the app, user and session ids and in
    a tool's arguments: keys stay within the store's bound, the cut turn replays all it recorded."""
    agent = LlmAgent(
        name="solo",
        instruction="solo",
        tools=[app.lookup, app.CHARGE],
        model=app.ScriptedModel(
            model="solo", script=[[("lookup", {"q": hostile}), ("charge", {"amount": 3})], "final answer {n}"]
        ),
    )
    ids = (hostile[:500], hostile, hostile + "/session")
    chat = Chat(store, CallJournal(), agent=agent, ids=ids)
    asyncio.run(chat.create())
    crash_after(ledger, "charge:3")
    with pytest.raises(Crash):
        asyncio.run(chat.send("ask:1"))
    again = chat.again(CallJournal(), agent=agent)
    events = asyncio.run(again.send("ask:1"))
    assert events[-1].content is not None
    assert events[-1].content.parts[0].text == app.answer(1)
    turn = again.journal.last_turn if again.journal else None
    assert turn is not None
    assert (turn.models.replayed, turn.tools.replayed, turn.tools.skipped) == (1, 1, 1)
    assert all(len(key) <= 1024 for key in chat.entry_keys())
    lookup = next(k for k in chat.entry_keys() if "|tool:lookup|" in k)
    assert store.recorded_call(chat.run_id, lookup).result["result"] == f"found:{hostile}"
    assert ledger.check_calls() == (2, 2)


def test_wrong_uses_are_refused_with_typed_errors(store: Any) -> None:
    """Bad input is an ``InvalidArgument`` naming what was wrong, never quoting the value."""
    with pytest.raises(InvalidArgument, match="marks a tool"):
        non_idempotent(42)
    with pytest.raises(InvalidArgument, match="hold"):
        CallJournal(hold=-1.0)
    with pytest.raises(InvalidArgument, match="wait"):
        CallJournal(wait=float("nan"))
    with pytest.raises(InvalidArgument, match="spend"):
        CallJournal(spend="0.5 per token")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="tool names"):
        CallJournal(non_idempotent={3: None})  # type: ignore[dict-item]

    async def on_memory() -> None:
        service = InMemorySessionService()
        await service.create_session(app_name=app.APP, user_id=USER, session_id=SESSION)
        runner = Runner(
            app=App(name=app.APP, root_agent=app.build(), plugins=[CallJournal()]), session_service=service
        )
        async for _ in runner.run_async(user_id=USER, session_id=SESSION, new_message=message("ask:1")):
            pass

    with pytest.raises(Exception) as refused:  # noqa: PT011 - ADK may wrap it
        asyncio.run(on_memory())
    seen: BaseException | None = refused.value
    while seen is not None and not isinstance(seen, InvalidArgument):
        seen = seen.__cause__ or seen.__context__
    assert isinstance(seen, InvalidArgument)
    assert "SafepointSessionService" in str(seen)


def test_the_documented_resume_leaves_each_event_once_after_two_cuts(
    tmp_path: Path, store: Any, ledger: Ledger
) -> None:
    """Cut twice in the same turn (after triage's charge, then after the specialist's), each time
    finished by sending the message again: the session holds the uninterrupted run's events."""
    chat = Chat(store, CallJournal())
    asyncio.run(chat.create())
    asyncio.run(chat.send("ask:1"))
    crash_after(ledger, "charge:14")
    with pytest.raises(Crash):
        asyncio.run(chat.send("ask:2"))
    crash_after(ledger, "lookup:b2")
    again = chat.again(CallJournal())
    asyncio.run(again.send("ask:2"))  # lookup:b2 was recorded before the cut: replayed, no effect
    assert ledger.on_effect is not None
    ledger.on_effect = None
    assert asyncio.run(chat.events()) == asyncio.run(reference_events(tmp_path, ["ask:1", "ask:2"]))
    assert json.dumps(counted(chat.counters())) == json.dumps(
        {"tokens_in": 63, "tokens_out": 30, "spend": 0.0, "model_calls": 6, "tool_calls": 7}
    )
    assert ledger.check_calls() == (6, 6)
