"""A step finished but never checkpointed: the next turn's input keeps its results.

A SIGKILL can land after every task of a step has written its result and
before the checkpoint after it is saved (under any durability). LangGraph's
``get_state`` then shows the step as done — its results in the values,
``next`` empty — so an application moves on to the user's next message; but
LangGraph discards those results when new input arrives, and a model
response already paid for (and recorded in the journal) vanishes from the
conversation. A journaling saver applies the finished step first
(``turns.FinishedStep``), so the next turn runs on the conversation
``get_state`` showed and every count matches an uninterrupted run.

The crash here is a ``BaseException`` raised by the saver's ``put`` of that
one checkpoint, in process, after the step's writes were stored: exactly the
state a SIGKILL leaves (``test_journal_langgraph_crash.py`` kills for real).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.globals import set_llm_cache
from langchain_core.messages import AIMessage, HumanMessage

from helpers import langgraph_journal_app as app
from safepoint import open_async_store, open_store
from safepoint.crashrig.ledger import Ledger

THREAD = {"configurable": {"thread_id": "finished"}}
LAST_STEP_OF_TURN_1 = 5  # agent (1), tools (2), agent (3), tools (4), agent's answer (5)


class Crash(BaseException):
    """The process dies here: nothing of LangGraph's or safepoint's catches it."""


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    app.PROVIDER.clear()
    app.LEDGER.clear()
    yield
    app.LEDGER.clear()
    set_llm_cache(None)


def crashing_put(saver: Any, step: int) -> None:
    """The saver dies saving the checkpoint after ``step`` (once): that step's writes are stored."""
    put, aput = saver.put, saver.aput

    def dies(metadata: Any) -> None:
        if metadata.get("step") == step:
            raise Crash

    def crashing(config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        dies(metadata)
        return put(config, checkpoint, metadata, versions)

    async def acrashing(config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        dies(metadata)
        return await aput(config, checkpoint, metadata, versions)

    saver.put, saver.aput = crashing, acrashing


def conversation(folder: Path, mode: str, durability: str | None, *, crash: bool) -> dict[str, Any]:
    """Two turns on a fresh database; with ``crash``, the process "dies" saving turn 1's last
    checkpoint and a fresh saver and graph (a new process) go on as the app would."""
    folder.mkdir()
    app.LEDGER.update(path=str(folder / "ledger.db"))
    url = f"sqlite:///{folder / 'state.db'}"
    is_async = mode in ("ainvoke", "astream")
    opener = open_async_store if is_async else open_store

    async def go(fail: bool) -> Any:
        store = await opener(url) if is_async else opener(url)
        saver = app.saver_for(store, journal=True)
        if fail:
            crashing_put(saver, LAST_STEP_OF_TURN_1)
        graph = app.build(saver, mode=mode)
        return store, saver, graph

    async def talk(graph: Any) -> str:
        if is_async:
            return await app.aconverse(graph, THREAD, 2, durability)
        return app.converse(graph, THREAD, 2, durability)

    async def whole() -> dict[str, Any]:
        if crash:
            store, _, graph = await go(fail=True)
            with pytest.raises(Crash):
                await talk(graph)
            snapshot = await graph.aget_state(THREAD) if is_async else graph.get_state(THREAD)
            assert not snapshot.next  # LangGraph shows turn 1 done: the app moves on
            assert isinstance(snapshot.values["messages"][-1], AIMessage)
            await store.close() if is_async else store.close()
        store, saver, graph = await go(fail=False)
        answer = await talk(graph)
        tally = await saver.journal.atally("finished") if is_async else saver.journal.tally("finished")
        snapshot = await graph.aget_state(THREAD) if is_async else graph.get_state(THREAD)
        await store.close() if is_async else store.close()
        return {"answer": answer, "tally": tally, "messages": snapshot.values["messages"]}

    found = asyncio.run(whole())
    with Ledger(folder / "ledger.db") as ledger:
        asked = [call for call in ledger.calls() if call.kind == "model"]
    found["asked"] = [(call.key, call.value["messages"]) for call in asked]
    return found


@pytest.mark.parametrize("durability", [None, "sync"])
@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_the_next_turn_keeps_a_finished_step_whose_checkpoint_was_lost(
    tmp_path: Path, mode: str, durability: str | None
) -> None:
    clean = conversation(tmp_path / "clean", mode, durability, crash=False)
    crashed = conversation(tmp_path / "crashed", mode, durability, crash=True)
    # every model request asked with the whole conversation, none asked twice
    assert crashed["asked"] == clean["asked"]
    assert [m.content for m in crashed["messages"]] == [m.content for m in clean["messages"]]
    assert [type(m) for m in crashed["messages"]] == [type(m) for m in clean["messages"]]
    assert crashed["answer"] == clean["answer"]
    for counter in ("called", "tokens_in", "tokens_out", "spend", "resent", "divergences"):
        assert getattr(crashed["tally"], counter) == getattr(clean["tally"], counter), counter
    assert sum(isinstance(m, HumanMessage) for m in crashed["messages"]) == 2
