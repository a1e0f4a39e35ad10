"""The Agents SDK's call journal (``CallJournal``) with the SDK's real ``Agent``/``Runner`` and offline
scripted models (``helpers/oa_journal_agent.py``): every call seen, recorded and replayed.

A turn here is interrupted inside the process by an exception that no code
catches (``Crash``, raised right after a tool's effect), then resumed by a
fresh journal and session; the SIGKILLed version, in real child processes,
is ``test_journal_openai_agents_crash.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, ModelSettings, Runner, function_tool
from agents.retry import ModelRetrySettings
from agents.run import AgentRunner, get_default_agent_runner, set_default_agent_runner

import safepoint
from adapter_checks import BACKEND_KINDS, backend_store
from helpers import oa_journal_agent as app
from safepoint import InvalidArgument, Reconcile, RunHeld
from safepoint.adapters.openai_agents import CallJournal, SafepointSession, non_idempotent
from safepoint.adapters.openai_agents import sdk as oa_sdk
from safepoint.journal import ActionWaiting
from safepoint.testing.crash import Effect, Ledger

MODEL_KEYS = [
    "s|t1||triage|model#0",
    "s|t1||triage|model#1",
    "s|t1|/ask_helper:triage-1-0-{h}|helper|model#0",
    "s|t1|/ask_helper:triage-1-0-{h}|helper|model#1",
    "s|t1||triage|model#2",
    "s|t1||specialist|model#0",
    "s|t1||specialist|model#1",
]
MODES = ["run", "run_sync", "run_streamed"]
COUNTERS = {"tokens_in": 75, "tokens_out": 35, "spend": 0.0, "model_calls": 7, "tool_calls": 4}


class Crash(BaseException):
    """What kills a turn here: nothing in the SDK or the journal catches it."""


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "ledger.db") as opened:
        app.LEDGER["ledger"] = opened
        yield opened
    app.LEDGER["ledger"] = None


def crash_after(ledger: Ledger, key: str) -> None:
    def hook(effect: Effect) -> None:
        if effect.key == key:
            ledger.on_effect = None
            raise Crash

    ledger.on_effect = hook


def turn(mode: str, journal: CallJournal, session: SafepointSession, text: str = "hi") -> Any:
    """One turn the way a user makes it in ``mode``; the final output."""
    if mode == "run_sync":
        agent, config = app.build()
        return journal.run_sync(agent, text, session=session, run_config=config).final_output
    return asyncio.run(aturn(mode, journal, session, text))


async def aturn(mode: str, journal: CallJournal, session: SafepointSession, text: str = "hi") -> Any:
    agent, config = app.build()
    if mode == "run":
        return (await journal.run(agent, text, session=session, run_config=config)).final_output
    result = await journal.run_streamed(agent, text, session=session, run_config=config)
    async for _ in result.stream_events():
        pass
    return result.final_output


def keys(store: Any, session: SafepointSession) -> list[str]:
    return [entry.key for entry in store.recorded_calls(session.run_id) if "|model#" in entry.key]


def test_the_sdk_names_the_journal_relies_on_are_there() -> None:
    """The SDK's non-public names (sdk.py) exist and mean what the journal takes them to mean."""
    agent, _ = app.build()
    tools = {tool.name: tool for tool in agent.tools}
    assert oa_sdk.is_agent_tool(tools["ask_helper"])
    assert not oa_sdk.is_agent_tool(tools["lookup"])
    assert oa_sdk.AgentRunner is AgentRunner
    assert all(callable(getattr(AgentRunner, name)) for name in ("run", "run_sync", "run_streamed"))
    assert oa_sdk.TOOL_OUTPUT.validate_python({"type": "text", "text": "x"}).text == "x"


@pytest.mark.parametrize("mode", MODES)
def test_every_model_and_tool_call_of_a_turn_is_recorded(mode: str, tmp_path: Path, ledger: Ledger) -> None:
    """Models given as instances and by name, handoff targets and an agent used as a tool: each call
    is journaled under its key, whether the turn runs with run, run_sync or run_streamed."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'db'}") as store:
        session = SafepointSession("s", store)
        journal = CallJournal()
        assert turn(mode, journal, session) == app.ANSWER
        helper_call = next(k for k in keys(store, session) if "/ask_helper:" in k).split("/ask_helper:")[1]
        h = helper_call.split("|")[0].rsplit("-", 1)[1]
        assert keys(store, session) == [k.format(h=h) for k in MODEL_KEYS]
        tools = [e.key for e in store.recorded_calls(session.run_id) if "|tool:" in e.key]
        assert sorted(t.split("|")[3] + "|" + t.split("|")[4] for t in tools) == [
            "helper|tool:lookup",
            "specialist|tool:charge",
            "triage|tool:charge",
            "triage|tool:lookup",
        ]
        assert journal.last_turn is not None
        assert journal.last_turn.models.called == 7
        assert store.load(session.run_id).counters == {**COUNTERS, **dict.fromkeys(LOST, 0)}
    assert ledger.model_calls() == 7


LOST = ("resent_calls", "lost_tokens_in_estimate", "lost_tokens_out_estimate", "lost_spend_estimate")


@pytest.mark.parametrize(("crashed", "resumed"), [(m, m) for m in MODES] + [("run_streamed", "run")])
def test_a_turn_resumed_after_a_crash_repeats_nothing(
    crashed: str, resumed: str, tmp_path: Path, ledger: Ledger
) -> None:
    """Stopped right after the specialist's charge, the turn resumes on a fresh journal and session:
    the session is rolled back, 6 responses and 3 tool results replay, the charge in flight goes to
    its reconcile hook, and only the one model call never recorded is made."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'db'}") as store:
        crash_after(ledger, "charge:7")
        with pytest.raises(Crash):
            turn(crashed, CallJournal(), SafepointSession("s", store))
        assert ledger.check_calls() == (4, 6)
        journal = CallJournal(wait=0)  # the stopped turn let go of its session: no wait
        assert turn(resumed, journal, SafepointSession("s", store)) == app.ANSWER
        last = journal.last_turn
        assert last is not None
        assert last.resumed
        assert last.number == 1
        assert last.rolled_back > 0
        assert (last.models.replayed, last.models.called, last.models.resent) == (6, 1, 0)
        assert (last.tools.replayed, last.tools.reconciled, last.tools.called) == (3, 1, 0)
        assert ledger.check_calls() == (4, 7)
        head = store.load(SafepointSession("s", store).run_id)
        assert {k: head.counters[k] for k in COUNTERS} == COUNTERS
        assert head.state["openai_agents.turn"] == 1


@pytest.mark.parametrize("kind", BACKEND_KINDS)
def test_resume_on_every_backend(kind: str, tmp_path: Path, ledger: Ledger) -> None:
    """The crash-and-resume turn on SQLite and PostgreSQL, through a Store and an AsyncStore."""

    async def scenario() -> None:
        async with backend_store(kind, tmp_path) as store:
            crash_after(ledger, "charge:5")
            with pytest.raises(Crash):
                await aturn("run", CallJournal(), SafepointSession("s", store))
            journal = CallJournal(wait=0)
            assert await aturn("run", journal, SafepointSession("s", store)) == app.ANSWER
            assert journal.last_turn is not None
            assert journal.last_turn.models.replayed == 1

    asyncio.run(scenario())
    assert ledger.check_calls() == (4, 7)


def test_a_changed_request_is_called_again_and_counted_as_a_divergence(
    tmp_path: Path, ledger: Ledger
) -> None:
    """A resumed turn whose requests changed (new instructions) replays none of them: each is called
    and recorded under a key of its own, and counted as a divergence."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'db'}") as store:
        crash_after(ledger, "charge:7")
        with pytest.raises(Crash):
            turn("run", CallJournal(), SafepointSession("s", store))
        agent, config = app.build()
        changed = agent.clone(instructions="triage, differently")
        journal = CallJournal()
        asyncio.run(journal.run(changed, "hi", session=SafepointSession("s", store), run_config=config))
        assert journal.last_turn is not None
        assert journal.last_turn.models.divergences >= 1
        assert any("~" in k for k in keys(store, SafepointSession("s", store)))


class Opaque:
    """A tool result JSON cannot hold (and a deterministic text for the model)."""

    def __str__(self) -> str:
        return "opaque"


@function_tool
async def opaque_tool() -> Any:
    """Returns something JSON cannot hold."""
    return Opaque()


def test_a_result_json_cannot_hold_is_used_not_recorded(tmp_path: Path, ledger: Ledger) -> None:
    """A tool result that is not JSON is handed on to the SDK, counted as unrecorded, never pickled."""
    agent = Agent(name="o", tools=[opaque_tool], model=app.ScriptedModel("o", [[("opaque_tool", {})], "ok"]))
    with safepoint.open_store(f"sqlite:///{tmp_path / 'db'}") as store:
        session = SafepointSession("s", store)
        journal = CallJournal()
        assert asyncio.run(journal.run(agent, "hi", session=session)).final_output == "ok"
        assert journal.last_turn is not None
        assert journal.last_turn.tools.unrecorded == 1
        outputs = [i for i in asyncio.run(session.get_items()) if i.get("type") == "function_call_output"]
        assert outputs[0]["output"] == "opaque"
        assert not any("opaque_tool" in e.key for e in store.recorded_calls(session.run_id))


def test_a_non_idempotent_tool_without_a_hook_stops_the_turn_as_waiting(
    tmp_path: Path, ledger: Ledger
) -> None:
    """A charge in flight with no reconcile hook raises ActionWaiting and keeps the turn open; the
    same call with a ``skip`` hook then settles it without charging again."""

    @non_idempotent
    @function_tool
    async def pay(amount: int) -> str:
        """Pays (non-idempotent)."""
        ledger.record(f"pay:{amount}")
        return f"paid:{amount}"

    def agent() -> Agent[Any]:
        return Agent(name="p", tools=[pay], model=app.ScriptedModel("p", [[("pay", {"amount": 3})], "done"]))

    with safepoint.open_store(f"sqlite:///{tmp_path / 'db'}") as store:
        crash_after(ledger, "pay:3")
        with pytest.raises(Crash):
            asyncio.run(CallJournal().run(agent(), "hi", session=SafepointSession("s", store)))
        with pytest.raises(ActionWaiting):
            asyncio.run(CallJournal().run(agent(), "hi", session=SafepointSession("s", store)))
        journal = CallJournal(non_idempotent={"pay": Reconcile.skip("paid:3")})
        result = asyncio.run(journal.run(agent(), "hi", session=SafepointSession("s", store)))
        assert result.final_output == "done"
    assert ledger.check_exactly_once() == 1


def test_the_tool_gets_its_call_key(tmp_path: Path, ledger: Ledger) -> None:
    """``current_call_key()`` inside a journaled tool is the key its entry has (the same on resume)."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'db'}") as store:
        session = SafepointSession("s", store)
        turn("run", CallJournal(), session)
        keys_of_charges = {e.key for e in store.recorded_calls(session.run_id) if "tool:charge" in e.key}
    handed = {effect.value["journal_key"] for effect in ledger.calls() if effect.kind == "record"}
    assert handed == keys_of_charges
    assert len(handed) == 2


@pytest.mark.parametrize("shared", [False, True])
def test_a_second_caller_waits_for_the_turn_and_replays_it(
    shared: bool, tmp_path: Path, ledger: Ledger
) -> None:
    """Two callers resume one open turn at once in one process (each with its session object, or
    both with one): the second waits for the first to finish, then runs the turn again with every
    call replayed — no effect twice."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'db'}") as store:
        crash_after(ledger, "charge:7")
        with pytest.raises(Crash):
            turn("run", CallJournal(), SafepointSession("s", store))
        one = SafepointSession("s", store)

        async def both() -> list[Any]:
            first, second = CallJournal(), CallJournal()
            answers = await asyncio.gather(
                aturn("run", first, one if shared else SafepointSession("s", store)),
                aturn("run", second, one if shared else SafepointSession("s", store)),
            )
            turns = [first.last_turn, second.last_turn]
            assert all(t is not None and t.number == 1 for t in turns)
            assert sorted(t.models.called for t in turns if t is not None) == [0, 1]
            return answers

        assert asyncio.run(both()) == [app.ANSWER, app.ANSWER]
    assert ledger.check_calls() == (4, 7)


def test_turns_are_numbered_and_a_finished_one_is_never_resumed(tmp_path: Path, ledger: Ledger) -> None:
    """The same input again after a finished turn is a new turn; a very long session id still keys."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'db'}") as store:
        session = SafepointSession("s" * 600, store)
        journal = CallJournal()
        turn("run", journal, session)
        turn("run", journal, session)
        assert journal.last_turn is not None
        assert journal.last_turn.number == 2
        assert not journal.last_turn.resumed
        assert store.load(session.run_id).counters["model_calls"] == 14
    assert ledger.model_calls() == 14


class CountingRunner(AgentRunner):
    """An app's own default runner."""

    runs = 0

    async def run(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        CountingRunner.runs += 1
        return await super().run(starting_agent, input, **kwargs)


def test_the_apps_default_runner_stays_in_the_chain_and_nothing_is_journaled_outside_a_turn(
    tmp_path: Path, ledger: Ledger
) -> None:
    """The journal's runner goes in front of the runner the app installed; a plain ``Runner.run``
    (no journal) still works and records nothing; the user's agents are left as they were."""
    before = get_default_agent_runner()
    set_default_agent_runner(CountingRunner())
    try:
        with safepoint.open_store(f"sqlite:///{tmp_path / 'db'}") as store:
            turn("run", CallJournal(), SafepointSession("s", store))
            assert CountingRunner.runs == 2  # the turn, and the agent used as a tool
            agent, config = app.build()
            plain = SafepointSession("plain", store)
            result = asyncio.run(Runner.run(agent, "hi", session=plain, run_config=config))
            assert result.final_output == app.ANSWER
            assert result.last_agent.name == "specialist"
            assert store.recorded_calls(plain.run_id) == []
            assert isinstance(agent.model, app.ScriptedModel)
    finally:
        set_default_agent_runner(before)


def test_wrong_uses_are_refused(tmp_path: Path) -> None:
    """A journal needs a SafepointSession; run_sync needs a sync store; the decorator a FunctionTool."""
    agent, _ = app.build()
    with pytest.raises(InvalidArgument):
        asyncio.run(CallJournal().run(agent, "hi", session=object()))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        non_idempotent(lambda: None)  # type: ignore[arg-type]

    async def async_store() -> None:
        store = await safepoint.open_async_store(f"sqlite:///{tmp_path / 'db'}")
        try:
            with pytest.raises(InvalidArgument):
                CallJournal().run_sync(agent, "hi", session=SafepointSession("s", store))
        finally:
            await store.close()

    asyncio.run(async_store())


class FlakyModel(app.ScriptedModel):
    """Fails its first request the way a dropped connection does, then answers."""

    failed = False

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        if not FlakyModel.failed:
            FlakyModel.failed = True
            raise ConnectionError("connection reset")
        return await super().get_response(*args, **kwargs)


def test_a_call_the_sdk_retries_is_no_crash(tmp_path: Path, ledger: Ledger) -> None:
    """A model call that failed and that the SDK retries finds its own intent: the retry takes the
    failed call's place and is not counted as a re-sent call."""
    retry = ModelRetrySettings(max_retries=2, policy=lambda _: True, backoff={"initial_delay": 0.0})
    agent = Agent(name="f", model=FlakyModel("f", ["ok"]), model_settings=ModelSettings(retry=retry))
    with safepoint.open_store(f"sqlite:///{tmp_path / 'db'}") as store:
        session = SafepointSession("s", store)
        journal = CallJournal()
        assert asyncio.run(journal.run(agent, "hi", session=session)).final_output == "ok"
        assert FlakyModel.failed
        assert journal.last_turn is not None
        assert (journal.last_turn.models.called, journal.last_turn.models.resent) == (1, 0)
        assert keys(store, session) == ["s|t1||f|model#0"]
        assert store.load(session.run_id).counters["resent_calls"] == 0


def test_a_long_turn_keeps_its_session_held(tmp_path: Path, ledger: Ledger) -> None:
    """The turn's lease is renewed while it runs: past several lease periods, a second caller that
    will not wait is still refused (RunHeld), and the first turn ends normally."""
    release = asyncio.Event()

    @function_tool
    async def slow() -> str:
        """Works until the test lets it finish."""
        await release.wait()
        return "slow done"

    def agent() -> Agent[Any]:
        return Agent(name="w", tools=[slow], model=app.ScriptedModel("w", [[("slow", {})], "done"]))

    async def scenario(store: Any) -> Any:
        first = asyncio.create_task(
            CallJournal(hold=0.4).run(agent(), "hi", session=SafepointSession("s", store))
        )
        await asyncio.sleep(1.2)  # three lease periods: without its heartbeat the lease would be gone
        quick = Agent(name="q", model=app.ScriptedModel("q", ["quick"]))
        with pytest.raises(RunHeld):
            await CallJournal(wait=0).run(quick, "other", session=SafepointSession("s", store))
        release.set()
        return (await first).final_output

    with safepoint.open_store(f"sqlite:///{tmp_path / 'db'}") as store:
        assert asyncio.run(scenario(store)) == "done"
