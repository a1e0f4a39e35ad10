"""LangGraph's call journal, in one process: what is recorded, what replays, what never does.

A turn is "crashed" here by an exception a node raises after its model call
(or a ``BaseException`` a tool raises after its effect): LangGraph keeps no
checkpoint past the failed step, the journal keeps what was recorded, and
``invoke(None)`` runs the step again. Real ``StateGraph``s, a real SQLite
store, the scripted offline model of ``helpers/langgraph_journal_app.py``
(which notes every request reaching its "provider" in ``PROVIDER``). The
real-process SIGKILL tests are ``test_journal_langgraph_crash.py``.
"""

from __future__ import annotations

import asyncio
import datetime
import inspect
from pathlib import Path
from typing import Any

import pytest
from langchain_core.globals import set_llm_cache
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.pregel import Pregel

from helpers import langgraph_journal_app as app
from helpers.langgraph_journal_app import NeverHits, ScriptedChat, State
from safepoint import open_async_store, open_store
from safepoint.adapters.langgraph import JournalOptions, SafepointSaver, patches

MODES = ("invoke", "ainvoke", "stream", "astream")
CACHES = ("none", "global", "true", "false", "instance")
THREAD = {"configurable": {"thread_id": "t"}}
ROOT_RUN = "langgraph/t"


class Boom(Exception):
    """The crash stand-in: raised by a node after its model call, once."""


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    app.PROVIDER.clear()
    app.LEDGER.clear()
    yield
    set_llm_cache(None)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as opened:
        yield opened


def is_async(mode: str) -> bool:
    return mode in ("ainvoke", "astream")


def one_call(
    saver: Any, mode: str, *, model: Any = None, fail: int = 1, prompts: list[str] | None = None
) -> Any:
    """START → agent → END: the agent asks the model once (by ``mode``), then raises ``Boom``
    the first ``fail`` times; ``prompts`` (popped per attempt) change what it asks."""
    chat = (model or ScriptedChat()).bind_tools(app.TOOLS)
    left = [fail]

    def request(state: State) -> list[Any]:
        extra = [HumanMessage(prompts.pop(0))] if prompts else []
        return [*state["messages"], *extra]

    def done(message: Any) -> dict[str, Any]:
        if left[0]:
            left[0] -= 1
            raise Boom
        return {"messages": [message]}

    def agent(state: State, config: RunnableConfig) -> dict[str, Any]:
        if mode == "stream":
            whole = None
            for chunk in chat.stream(request(state), config):
                whole = chunk if whole is None else whole + chunk
            return done(whole)
        return done(chat.invoke(request(state), config))

    async def aagent(state: State, config: RunnableConfig) -> dict[str, Any]:
        if mode == "astream":
            whole = None
            async for chunk in chat.astream(request(state), config):
                whole = chunk if whole is None else whole + chunk
            return done(whole)
        return done(await chat.ainvoke(request(state), config))

    graph = StateGraph(State)
    graph.add_node("agent", aagent if is_async(mode) else agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(checkpointer=saver)


def run(graph: Any, mode: str, given: Any) -> Any:
    if is_async(mode):
        return asyncio.run(graph.ainvoke(given, THREAD))
    return graph.invoke(given, THREAD)


def crashed_then_resumed(graph: Any, mode: str) -> Any:
    with pytest.raises(Boom):
        run(graph, mode, {"messages": [HumanMessage("turn 1")]})
    return run(graph, mode, None)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("mode", MODES)
def test_every_model_path_replays_whatever_the_cache(store: Any, mode: str, cache: str) -> None:
    """invoke, ainvoke, stream, astream x every cache setting: the step run again after the
    crash gets the recorded response back — same message, same tool-call ids — not from the
    provider, and not from the model's cache (which a replay never consults)."""
    watched = NeverHits()
    model = ScriptedChat()
    if cache in ("global", "true", "false"):
        set_llm_cache(watched)
        model.cache = {"global": None, "true": True, "false": False}[cache]
    elif cache == "instance":
        model.cache = watched
    saver = SafepointSaver(store, journal=True)
    out = crashed_then_resumed(one_call(saver, mode, model=model), mode)
    assert app.PROVIDER == ["h1:a0"]  # the provider answered once
    [entry] = store.recorded_calls(ROOT_RUN)
    recorded = entry.result["message"]["data"] if "message" in entry.result else None
    recorded = recorded or entry.result["generations"][0]["message"]["data"]
    replayed = out["messages"][-1]
    assert [c["id"] for c in replayed.tool_calls] == [c["id"] for c in recorded["tool_calls"]]
    assert replayed.id == recorded["id"]
    assert saver.journal.seen.replayed == 1
    consulted = cache not in {"false", "none"} and mode in ("invoke", "ainvoke")
    assert watched.lookups == (1 if consulted else 0)


def test_counters_count_each_recorded_call_once(store: Any) -> None:
    """A replayed message still carries its usage_metadata; the journal's counters do not add it twice."""
    saver = SafepointSaver(store, journal=JournalOptions(price=lambda usage: 0.5))
    crashed_then_resumed(one_call(saver, "invoke"), "invoke")
    tally = saver.journal.tally("t")
    assert (tally.called, tally.tokens_in, tally.tokens_out, tally.spend) == (1, 7, 3, 0.5)
    assert (tally.resent, tally.lost_tokens_in) == (0, 0)
    # The thread's run carries them (safepoint runs, the inspector): the replay added nothing.
    counters = store.load(ROOT_RUN).counters
    assert {k: counters[k] for k in ("tokens_in", "tokens_out", "spend", "model_calls", "resent_calls")} == {
        "tokens_in": 7,
        "tokens_out": 3,
        "spend": 0.5,
        "model_calls": 1,
        "resent_calls": 0,
    }
    second = one_call(SafepointSaver(store, journal=True), "invoke", fail=0)
    run(second, "invoke", {"messages": [HumanMessage("2")]})
    again = store.load(ROOT_RUN).counters  # a second turn, by a fresh saver: counted on top
    assert (again["model_calls"], again["tokens_in"]) == (2, 7 + 7 * 3)


def test_a_changed_request_is_called_recorded_and_counted(store: Any) -> None:
    """The step run again asks something else: not replayed — called, recorded under a key of its
    own, and counted as a divergence."""
    saver = SafepointSaver(store, journal=True)
    graph = one_call(saver, "invoke", prompts=["first wording", "second wording"])
    crashed_then_resumed(graph, "invoke")
    assert len(app.PROVIDER) == 2
    keys = [entry.key for entry in store.recorded_calls(ROOT_RUN) if entry.done]
    assert len(keys) == 2
    assert keys[1].startswith(keys[0] + "~")
    assert saver.journal.seen.divergences == 1
    assert saver.journal.tally("t").divergences == 1


class Leaky(ScriptedChat):
    """A model whose answer holds a token a scrub rule redacts."""

    def _reply(self, messages: list[Any]) -> AIMessage:
        app.PROVIDER.append("leaky")
        return AIMessage(content="your key is sk-proj-" + "A1b2C3" * 8)


def test_a_redacted_response_replays_redacted_and_counts_as_a_divergence(store: Any) -> None:
    saver = SafepointSaver(store, journal=True)
    out = crashed_then_resumed(one_call(saver, "invoke", model=Leaky()), "invoke")
    assert app.PROVIDER == ["leaky"]
    assert "sk-proj-" not in str(out["messages"][-1].content)
    assert "REDACTED" in str(out["messages"][-1].content)
    assert saver.journal.seen.divergences == 1


class Opaque(ScriptedChat):
    """A model whose answer holds a value JSON has no form for (LangGraph's checkpoint serializer
    has one of its own: the checkpoint is saved; the journal records only JSON)."""

    def _reply(self, messages: list[Any]) -> AIMessage:
        app.PROVIDER.append("opaque")
        return AIMessage(content="done", response_metadata={"at": datetime.datetime(2026, 1, 1)})


def test_an_unserializable_response_is_used_not_recorded_and_counted(store: Any) -> None:
    """Never pickled: the call's result is used, nothing recorded; the step run again calls
    again (its intent found in flight: counted as re-sent)."""
    saver = SafepointSaver(store, journal=True)
    crashed_then_resumed(one_call(saver, "invoke", model=Opaque()), "invoke")
    assert app.PROVIDER == ["opaque", "opaque"]
    seen = saver.journal.seen
    assert (seen.unrecorded, seen.replayed, seen.resent) == (2, 0, 1)
    assert not any(entry.done for entry in store.recorded_calls(ROOT_RUN))


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_a_stream_cut_short_is_a_call_in_flight(store: Any, mode: str) -> None:
    """A stream recorded only when complete: one the consumer leaves after its first chunk is
    sent again in the step's next run, and counted as re-sent (with its usage as the estimate)."""
    saver = SafepointSaver(store, journal=True)
    chat = ScriptedChat().bind_tools(app.TOOLS)
    cut = [True]

    def agent(state: State, config: RunnableConfig) -> dict[str, Any]:
        whole = None
        for chunk in chat.stream(state["messages"], config):
            if cut[0]:
                cut[0] = False
                raise Boom
            whole = chunk if whole is None else whole + chunk
        return {"messages": [whole]}

    async def aagent(state: State, config: RunnableConfig) -> dict[str, Any]:
        whole = None
        async for chunk in chat.astream(state["messages"], config):
            if cut[0]:
                cut[0] = False
                raise Boom
            whole = chunk if whole is None else whole + chunk
        return {"messages": [whole]}

    graph = StateGraph(State)
    graph.add_node("agent", aagent if is_async(mode) else agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    crashed_then_resumed(graph.compile(checkpointer=saver), mode)
    assert app.PROVIDER == ["h1:a0", "h1:a0"]
    tally = saver.journal.tally("t")
    assert (tally.called, tally.resent, tally.lost_tokens_in) == (1, 1, 7)
    counters = store.load(ROOT_RUN).counters  # the cut stream's cost apart from the counters
    assert (counters["tokens_in"], counters["resent_calls"], counters["lost_tokens_in_estimate"]) == (7, 1, 7)


def test_an_async_store_journals_too(tmp_path: Path) -> None:
    async def scenario() -> Any:
        async with await open_async_store(f"sqlite:///{tmp_path / 'a.db'}") as astore:
            saver = SafepointSaver(astore, journal=True)
            graph = one_call(saver, "ainvoke")
            with pytest.raises(Boom):
                await graph.ainvoke({"messages": [HumanMessage("turn 1")]}, THREAD)
            await graph.ainvoke(None, THREAD)
            return saver.journal.seen, await saver.journal.atally("t")

    seen, tally = asyncio.run(scenario())
    assert app.PROVIDER == ["h1:a0"]
    assert (seen.replayed, tally.called) == (1, 1)


def test_a_journaling_saver_on_an_async_store_refuses_a_sync_turn(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with await open_async_store(f"sqlite:///{tmp_path / 'a.db'}") as astore:
            graph = one_call(SafepointSaver(astore, journal=True), "invoke", fail=0)
            with pytest.raises(Exception, match="ainvoke/astream"):
                await asyncio.to_thread(graph.invoke, {"messages": [HumanMessage("turn 1")]}, THREAD)

    asyncio.run(scenario())


def test_under_exit_durability_the_run_exists_before_the_first_record(store: Any) -> None:
    """durability="exit" saves nothing before the turn ends; the journal makes the thread's run
    first, so the step's call is recorded while the turn runs — and replayed on resume."""
    saver = SafepointSaver(store, journal=True)
    graph = one_call(saver, "invoke")
    given = {"messages": [HumanMessage("turn 1")]}
    with pytest.raises(Boom):
        graph.invoke(given, THREAD, durability="exit")
    assert [entry.done for entry in store.recorded_calls(ROOT_RUN)] == [True]
    graph.invoke(None, THREAD, durability="exit")
    assert app.PROVIDER == ["h1:a0"]
    assert saver.journal.seen.replayed == 1


def test_without_the_journal_nothing_is_recorded_or_replayed(store: Any) -> None:
    crashed_then_resumed(one_call(SafepointSaver(store), "invoke"), "invoke")
    assert app.PROVIDER == ["h1:a0", "h1:a0"]
    assert store.recorded_calls(ROOT_RUN) == []


def test_the_private_names_the_patch_relies_on_are_there() -> None:
    """Every private LangChain/LangGraph name the journal touches, with the parameters it passes:
    a release that renames one fails here, by name, not silently in a user's process."""
    for owner, name in patches.PRIVATE:
        assert hasattr(owner, name), f"{owner.__name__}.{name} is gone: the journal's patch needs it"
    parameters = {
        "_generate_with_cache": {"messages", "stop", "run_manager"},
        "_agenerate_with_cache": {"messages", "stop", "run_manager"},
        "_should_stream": {"async_api"},
        "_convert_input": set(),
        "_get_llm_string": {"stop"},
    }
    for owner, name in patches.PRIVATE:
        found = set(inspect.signature(getattr(owner, name)).parameters)  # the original, when patched
        assert parameters[name] <= found, (
            f"{owner.__name__}.{name} no longer takes {parameters[name] - found}"
        )
    for method in ("stream", "astream"):
        assert {"input", "config"} <= set(inspect.signature(getattr(Pregel, method)).parameters)
    from langgraph._internal import _constants  # noqa: PLC0415  # private, pinned here on purpose

    assert _constants.CONFIG_KEY_CHECKPOINTER == patches.CHECKPOINTER
    assert _constants.CONFIG_KEY_TASK_ID == patches.TASK_ID


# -- tools ------------------------------------------------------------------------------


def agent_graph(store: Any, tmp_path: Path, **options: Any) -> tuple[Any, Any]:
    app.LEDGER["path"] = str(tmp_path / "ledger.db")
    saver = SafepointSaver(store, journal=JournalOptions(**options) if options else True)
    return saver, app.build(saver)


def test_a_tool_call_in_flight_at_a_crash_goes_to_its_reconcile_hook(store: Any, tmp_path: Path) -> None:
    """charge's effect happened, then the process "crashed" before its result was recorded: the
    resumed turn finds its intent, asks charge's hook (which asks the ledger: it happened) and
    takes its answer; the effect is not repeated, the idempotent lookup replays or reruns."""
    saver, graph = agent_graph(store, tmp_path)
    app.LEDGER["crash_after_charge"] = 1
    with pytest.raises(app.Crash):
        app.converse(graph, THREAD, 1, None)
    answer = app.converse(graph, THREAD, 1, None)
    assert answer == "turn 1: charged 10 for order-1; found item-1; found price-1"
    with app.Ledger(app.LEDGER["path"]) as ledger:
        assert ledger.check_calls() == (3, 3)  # charge once, two lookups; three model requests
        [charge] = [call for call in ledger.calls() if call.kind == "record"]
    key = charge.value["idempotency_key"]  # the journal key, handed to the tool
    [entry] = [e for e in store.recorded_calls(ROOT_RUN) if e.key == key]
    assert entry.done
    assert key.endswith("/tool:" + graph.get_state(THREAD).values["messages"][1].tool_calls[0]["id"])
    assert saver.journal.seen.reconciled == 1


class PayModel(ScriptedChat):
    """Asks for one ``pay`` call, then answers with what it returned."""

    def _reply(self, messages: list[Any]) -> AIMessage:
        app.PROVIDER.append("pay-model")
        results = [m.content for m in messages if m.type == "tool"]
        if results:
            return AIMessage(content=f"done: {results[-1]}")
        return AIMessage(content="", tool_calls=[{"name": "pay", "args": {"amount": 5}, "id": "call_pay1"}])


EFFECTS: list[tuple[int, str | None]] = []


def pay_graph(saver: Any, crash_first: bool, *, ask: bool = False) -> Any:
    from langchain_core.tools import tool  # noqa: PLC0415
    from langgraph.prebuilt import ToolNode, tools_condition  # noqa: PLC0415
    from langgraph.types import interrupt  # noqa: PLC0415

    from safepoint.adapters.langgraph import current_call_key, journal_tools  # noqa: PLC0415

    crash = [crash_first]

    @tool
    def pay(amount: int) -> str:
        """Pay (an effect)."""
        if ask:
            interrupt("may I pay?")
        EFFECTS.append((amount, current_call_key()))
        if crash[0]:
            crash[0] = False
            raise app.Crash
        return f"paid {amount}"

    model = PayModel().bind_tools([pay])

    def agent(state: State, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"], config)]}

    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([pay], **journal_tools()))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


@pytest.fixture(autouse=True)
def _effects() -> None:
    EFFECTS.clear()


def test_rerun_runs_the_tool_again_under_the_same_key(store: Any) -> None:
    from safepoint.harness.actions import Reconcile  # noqa: PLC0415

    saver = SafepointSaver(store, journal=JournalOptions(non_idempotent={"pay": Reconcile.rerun()}))
    graph = pay_graph(saver, crash_first=True)
    with pytest.raises(app.Crash):
        graph.invoke({"messages": [HumanMessage("pay")]}, THREAD)
    out = graph.invoke(None, THREAD)
    assert out["messages"][-1].content == "done: paid 5"
    assert len(EFFECTS) == 2
    assert EFFECTS[0][1] == EFFECTS[1][1]  # one idempotency key: a service dedupes the second
    assert EFFECTS[0][1] is not None


def test_wait_pauses_the_graph_for_a_human_decision(store: Any) -> None:
    """No hook (``None``): the in-flight call waits — a LangGraph interrupt naming the tool, its
    key and arguments; the answer ``{"decision": "skip", "result": ...}`` is taken as its result."""
    from langgraph.types import Command  # noqa: PLC0415

    saver = SafepointSaver(store, journal=JournalOptions(non_idempotent={"pay": None}))
    graph = pay_graph(saver, crash_first=True)
    with pytest.raises(app.Crash):
        graph.invoke({"messages": [HumanMessage("pay")]}, THREAD)
    graph.invoke(None, THREAD)
    [task] = graph.get_state(THREAD).tasks
    question = task.interrupts[0].value
    assert (question["safepoint"], question["tool"], question["args"]) == ("reconcile", "pay", {"amount": 5})
    assert question["key"] == EFFECTS[0][1]
    out = graph.invoke(Command(resume={"decision": "skip", "result": "paid 5 (confirmed)"}), THREAD)
    assert out["messages"][-1].content == "done: paid 5 (confirmed)"
    assert len(EFFECTS) == 1


def test_a_non_idempotent_tool_that_interrupts_runs_when_resumed(store: Any) -> None:
    """A tool asking a human (``interrupt()``) before its effect is run again on resume, as
    LangGraph does — not taken for a call in flight at a crash."""
    from langgraph.types import Command  # noqa: PLC0415

    from safepoint.harness.actions import Reconcile  # noqa: PLC0415

    saver = SafepointSaver(store, journal=JournalOptions(non_idempotent={"pay": Reconcile.skip("skipped")}))
    graph = pay_graph(saver, crash_first=False, ask=True)
    graph.invoke({"messages": [HumanMessage("pay")]}, THREAD)
    assert graph.get_state(THREAD).tasks[0].interrupts[0].value == "may I pay?"
    out = graph.invoke(Command(resume="yes"), THREAD)
    assert out["messages"][-1].content == "done: paid 5"
    assert len(EFFECTS) == 1
    assert saver.journal.seen.reconciled == 0


def test_a_turn_holds_the_thread_run(store: Any, tmp_path: Path) -> None:
    """While a turn runs, its thread's run is held: another writer cannot take it."""
    from safepoint import RunHeld  # noqa: PLC0415

    seen: list[str] = []
    saver = SafepointSaver(store, journal=True)

    def agent(state: State) -> dict[str, Any]:
        with pytest.raises(RunHeld):
            store.hold_run(ROOT_RUN, "intruder", lease=1.0)
        seen.append("held")
        return {"messages": [AIMessage("ok")]}

    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    compiled = graph.compile(checkpointer=saver)
    compiled.invoke({"messages": [HumanMessage("hi")]}, THREAD)
    assert seen == ["held"]
    store.release_hold(store.hold_run(ROOT_RUN, "after", lease=1.0))  # let go at the turn's end


# -- forks --------------------------------------------------------------------------------


class Ticker(ScriptedChat):
    """Answers the same request differently each time (a clock), so a replay shows."""

    def _reply(self, messages: list[Any]) -> AIMessage:
        app.PROVIDER.append("tick")
        return AIMessage(content=f"tick {len(app.PROVIDER)}")


def ticking(saver: Any) -> Any:
    """A node asking the model the very same thing three times in a row."""
    model = Ticker()

    def tick(state: State, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [model.invoke([HumanMessage("what time is it?")], config)]}

    def again(state: State) -> str:
        return "tick" if sum(m.type == "ai" for m in state["messages"]) < 3 else END

    graph = StateGraph(State)
    graph.add_node("tick", tick)
    graph.add_edge(START, "tick")
    graph.add_conditional_edges("tick", again)
    return graph.compile(checkpointer=saver)


def lineages(store: Any) -> list[int]:
    import json  # noqa: PLC0415

    return [json.loads(entry.key.split("]]/")[0] + "]]")[2] for entry in store.recorded_calls(ROOT_RUN)]


def test_a_fork_never_replays_its_parents_entries(store: Any) -> None:
    """Run again from an older checkpoint, the same request at the same step and path is called,
    not replayed: the fork records under a new lineage."""
    saver = SafepointSaver(store, journal=True)
    graph = ticking(saver)
    graph.invoke({"messages": [HumanMessage("start")]}, THREAD)
    after_first = next(
        s for s in graph.get_state_history(THREAD) if sum(m.type == "ai" for m in s.values["messages"]) == 1
    )
    out = graph.invoke(None, after_first.config)
    assert [m.content for m in out["messages"] if m.type == "ai"] == ["tick 1", "tick 4", "tick 5"]
    assert saver.journal.seen.replayed == 0
    assert lineages(store) == [0, 0, 0, 1, 1]


def test_a_branch_made_by_update_state_starts_a_new_lineage(store: Any) -> None:
    saver = SafepointSaver(store, journal=True)
    graph = ticking(saver)
    graph.invoke({"messages": [HumanMessage("start")]}, THREAD)
    after_first = next(
        s for s in graph.get_state_history(THREAD) if sum(m.type == "ai" for m in s.values["messages"]) == 1
    )
    graph.update_state(after_first.config, {"messages": []}, as_node="tick")
    graph.invoke(None, THREAD)
    assert saver.journal.seen.replayed == 0
    assert lineages(store) == [0, 0, 0, 1, 1]


def test_the_example_runs(tmp_path: Path) -> None:
    """examples/langgraph_journal.py (the diff docs/journal-langgraph.md shows) runs offline: its
    first process is SIGKILLed right after the charge, the resumed one charges nothing again."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, str(root / "examples" / "langgraph_journal.py"), f"sqlite:///{tmp_path / 'e.db'}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(root / "src")},
        timeout=300,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert "first process: SIGKILLed after the charge" in lines
    assert "answer: Done: A-7: 2 printers, 90 EUR; charged 90 EUR" in lines
    assert "payments made: 1" in lines
    assert lines[-1].endswith("reconciled 1")


def test_a_subgraphs_calls_are_journaled_under_their_namespace(store: Any) -> None:
    """A subgraph's model call is recorded in the thread's root run, keyed by the namespace with
    its task ids stripped (they change when the step runs again), and replays."""
    inner = one_call(None, "invoke")  # checkpointer None: the parent's saver, through the config
    parent = StateGraph(State)
    parent.add_node("child", inner)
    parent.add_edge(START, "child")
    parent.add_edge("child", END)
    saver = SafepointSaver(store, journal=True)
    crashed_then_resumed(parent.compile(checkpointer=saver), "invoke")
    assert app.PROVIDER == ["h1:a0"]
    [entry] = store.recorded_calls(ROOT_RUN)
    assert entry.key.startswith('["t","child|agent",0,')
    assert saver.journal.seen.replayed == 1


def test_a_model_called_from_a_tool_is_keyed_under_the_tool_call(store: Any) -> None:
    from langchain_core.tools import tool  # noqa: PLC0415
    from langgraph.prebuilt import ToolNode  # noqa: PLC0415

    from safepoint.adapters.langgraph import journal_tools  # noqa: PLC0415

    @tool
    def summarize(text: str) -> str:
        """Summarize with a model."""
        return str(ScriptedChat().invoke([HumanMessage(text)]).content)

    call = AIMessage(content="", tool_calls=[{"name": "summarize", "args": {"text": "x"}, "id": "call_s"}])
    graph = StateGraph(State)
    graph.add_node("tools", ToolNode([summarize], **journal_tools()))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    graph.compile(checkpointer=SafepointSaver(store, journal=True)).invoke({"messages": [call]}, THREAD)
    keys = [entry.key.split("]]/", 1)[1] for entry in store.recorded_calls(ROOT_RUN)]
    assert keys == ["tool:call_s/model#0", "tool:call_s"]


def test_replay_on_postgresql(postgres_dsn: str, pg_schema: str) -> None:
    """The same journal on PostgreSQL: the step run again after the crash replays."""
    with open_store(postgres_dsn, schema=pg_schema, max_size=2) as pg:
        saver = SafepointSaver(pg, journal=True)
        crashed_then_resumed(one_call(saver, "stream"), "stream")
        assert app.PROVIDER == ["h1:a0"]
        assert (saver.journal.seen.replayed, saver.journal.tally("t").called) == (1, 1)


def test_a_prebuilt_react_agent_journals_its_sent_tool_calls(store: Any, tmp_path: Path) -> None:
    """create_react_agent sends each tool call as a task of its own (a push path); the journaled
    ToolNode keys them by tool-call id all the same, and a crash after the charge costs nothing."""
    import warnings  # noqa: PLC0415

    from langgraph.prebuilt import ToolNode  # noqa: PLC0415

    from safepoint.adapters.langgraph import journal_tools  # noqa: PLC0415

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # it has moved to langchain.agents; still LangGraph's own here
        from langgraph.prebuilt import create_react_agent  # noqa: PLC0415

        app.LEDGER.update(path=str(tmp_path / "ledger.db"), crash_after_charge=1)
        saver = SafepointSaver(store, journal=True)
        agent = create_react_agent(ScriptedChat(), ToolNode(app.TOOLS, **journal_tools()), checkpointer=saver)
    with pytest.raises(app.Crash):
        agent.invoke({"messages": [HumanMessage("turn 1")]}, THREAD)
    out = agent.invoke(None, THREAD)
    assert out["messages"][-1].content == "turn 1: charged 10 for order-1; found item-1; found price-1"
    with app.Ledger(app.LEDGER["path"]) as ledger:
        ledger.check_calls()
    assert any('"__pregel_push"' in entry.key for entry in store.recorded_calls(ROOT_RUN))


@pytest.mark.parametrize("flavour", ["Store", "AsyncStore"])
def test_two_tasks_resuming_one_thread_at_once_take_turns(tmp_path: Path, flavour: str) -> None:
    """Two ainvoke(None) of the same crashed thread at once, in one process: one holds the thread
    for the turn, the other waits for it, then finds the turn done — the charge is made once."""

    async def scenario() -> list[Any]:
        url = f"sqlite:///{tmp_path / 'state.db'}"
        opened: Any = open_store(url) if flavour == "Store" else await open_async_store(url)
        app.LEDGER.update(path=str(tmp_path / "ledger.db"), crash_after_charge=1)
        graph = app.build(SafepointSaver(opened, journal=True), mode="ainvoke", delay=0.01)
        with pytest.raises(app.Crash):
            await graph.ainvoke({"messages": [HumanMessage("turn 1")]}, THREAD)
        outs = await asyncio.gather(graph.ainvoke(None, THREAD), graph.ainvoke(None, THREAD))
        await opened.close() if flavour == "AsyncStore" else opened.close()
        return [out["messages"][-1].content for out in outs]

    answers = asyncio.run(scenario())
    assert answers == ["turn 1: charged 10 for order-1; found item-1; found price-1"] * 2
    with app.Ledger(app.LEDGER["path"]) as ledger:
        ledger.check_calls()


def test_a_requests_digest_ignores_message_ids_and_chunking() -> None:
    """What the provider reads decides: a message's id (LangGraph renews it when a step runs
    again) and whether the answer came as a merged stream chunk do not change the digest."""
    from langchain_core.messages import AIMessageChunk  # noqa: PLC0415

    from safepoint.adapters.langgraph.calls import request_digest  # noqa: PLC0415

    model = ScriptedChat()
    call = {"name": "lookup", "args": {"q": "x"}, "id": "call_1"}
    chunk = AIMessageChunk(content="", tool_call_chunks=[{**call, "args": '{"q": "x"}', "index": 0}], id="a")
    streamed = [HumanMessage("hi", id="h1"), chunk]
    loaded = [HumanMessage("hi", id="h2"), AIMessage(content="", tool_calls=[call], id="b")]
    assert request_digest(model, streamed, None, {}) == request_digest(model, loaded, None, {})
    changed = [HumanMessage("hi!"), loaded[1]]
    assert request_digest(model, changed, None, {}) != request_digest(model, loaded, None, {})
