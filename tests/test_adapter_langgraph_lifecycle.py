"""A LangGraph thread's life on safepoint: done at the graph's end, running again on the next
turn, kept by store-wide retention; ``prune`` and ``delete_for_runs`` on real graphs.

LangGraph's conformance suite (test_adapter_langgraph_conformance.py) says what prune and
delete_for_runs must return; these tests prove what safepoint adds: ``safepoint verify`` is
clean after either (they rebuild the thread and let retention drop the rest — nothing edited
in place), the dropped checkpoints are gone from every step, a rebuild interrupted before its
switch leaves the thread as it was, and a rolled-back thread goes on. Each runs on SQLite and
on PostgreSQL (a schema of its own), with fresh savers as a user's processes would have.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from safepoint import Retention, Status
from safepoint.adapters.langgraph import SafepointSaver, pruning
from safepoint_exe import sp

MARK = "only-in-the-second-run \u202e'; DROP TABLE safepoint_runs; --"
KEYS = "index:" + "C" * 43 + "= k1:" + "D" * 43 + "="


class Notes(TypedDict):
    notes: Annotated[list[str], operator.add]


def build(saver: SafepointSaver, seen: list[str] | None = None, *, pause: bool = False) -> Any:
    """START -> write -> review -> END; ``write`` records the thread run's status as it runs."""

    def write(state: Notes) -> dict[str, Any]:
        if seen is not None:
            seen.append(saver.store.run("langgraph/t").status.value)  # type: ignore[union-attr]
        return {"notes": [f"note {len(state['notes'])}"]}

    builder = StateGraph(Notes)
    builder.add_node("write", write)
    builder.add_node("review", lambda s: {"notes": ["reviewed"]})
    builder.add_edge(START, "write")
    builder.add_edge("write", "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=saver, interrupt_before=["review"] if pause else None)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'threads.db'}"
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        yield f"{dsn}?schema={schema}"


def cfg(run_id: str | None = None) -> RunnableConfig:
    """The thread's config; with ``run_id``, LangGraph records it in each checkpoint's metadata
    (as LangGraph's server does for every run it starts)."""
    configurable: dict[str, Any] = {"thread_id": "t"}
    if run_id is not None:
        configurable["run_id"] = run_id
    return {"configurable": configurable}


def verify_clean(tmp_path: Path, url: str) -> None:
    result = sp(tmp_path, "verify", "--store", url, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["failures"] == []


def steps_hold(store: safepoint.Store, run_id: str, text: str) -> list[int]:
    """The steps of ``run_id`` whose checkpoint (state or messages) holds ``text``."""
    found = []
    for info in store.history(run_id):
        cp = store.load(run_id, info.step)
        if text in json.dumps([cp.state, list(cp.messages)], ensure_ascii=False):
            found.append(info.step)
    return found


def test_a_thread_is_done_at_the_graphs_end_and_running_on_the_next_turn(url: str) -> None:
    with safepoint.open_store(url) as store:
        seen: list[str] = []
        # durability="sync": each put lands before the next node runs (so write sees its status).
        build(SafepointSaver(store), seen).invoke({"notes": []}, cfg(), durability="sync")
        assert store.run("langgraph/t").status is Status.DONE
        build(SafepointSaver(store), seen).invoke({"notes": ["again"]}, cfg(), durability="sync")
        assert seen == ["running", "running"]  # the turn's first put marked it running again
        assert store.run("langgraph/t").status is Status.DONE
        paused = build(SafepointSaver(store), pause=True)
        paused.invoke({"notes": ["third"]}, cfg())
        assert store.run("langgraph/t").status is Status.RUNNING  # stopped before review: not its end
        assert paused.get_state(cfg()).next == ("review",)
        build(SafepointSaver(store), pause=True).invoke(None, cfg())
        assert store.run("langgraph/t").status is Status.DONE
        assert safepoint.open_store(url).runs(status="done").items[0].run_id == "langgraph/t"


@pytest.mark.parametrize("encrypted", [False, True])
def test_store_wide_retention_keeps_finished_threads_unless_told(url: str, encrypted: bool) -> None:
    options: dict[str, Any] = {"retention": Retention(delete_finished_after=timedelta(0))}
    if encrypted:
        options["encryption"] = safepoint.Keyring.from_text(KEYS)
    with safepoint.open_store(url, **options) as store:
        build(SafepointSaver(store)).invoke({"notes": []}, cfg())
        other = {"configurable": {"thread_id": "expiring"}}
        build(SafepointSaver(store, expire_finished_threads=True)).invoke({"notes": []}, other)
        plain = safepoint.Checkpoint(run_id="plain", status=Status.DONE)
        store.save(plain)
        for run_id in ("langgraph/t", "langgraph/expiring", "plain"):
            store.prune_run(run_id)
        left = {run.run_id for run in store.runs(limit=100).items}
        assert "langgraph/t" in left  # done, yet kept: the conversation may go on
        assert "langgraph/expiring" not in left
        assert "plain" not in left
        # A policy set on the thread's run itself is the user's word: it applies.
        store.set_retention("langgraph/t", Retention(delete_finished_after=timedelta(0)))
        store.prune_run("langgraph/t")
        assert "langgraph/t" not in {run.run_id for run in store.runs(limit=100).items}


def test_delete_for_runs_rolls_a_thread_back_and_it_goes_on(url: str, tmp_path: Path) -> None:
    with safepoint.open_store(url) as store:
        build(SafepointSaver(store)).invoke({"notes": ["first"]}, cfg("r1"))
        before = build(SafepointSaver(store)).get_state(cfg())
        build(SafepointSaver(store)).invoke({"notes": [MARK]}, cfg("r2"))
        assert steps_hold(store, "langgraph/t", MARK)
        SafepointSaver(store).delete_for_runs(["r2"])
        state = build(SafepointSaver(store)).get_state(cfg())
        assert state.values == before.values
        assert state.config == before.config
        assert steps_hold(store, "langgraph/t", MARK) == []  # gone from every step kept
        history = [t.metadata.get("run_id") for t in SafepointSaver(store).list(cfg())]
        assert set(history) == {"r1"}
        head = store.load("langgraph/t")
        assert head.state["rebuilt"] == {"operation": "delete_for_runs", "floor": head.state["floor"]}
        assert store.history("langgraph/t")[0].step == head.state["floor"]  # retention dropped the rest
    verify_clean(tmp_path, url)
    with safepoint.open_store(url) as store:
        after = build(SafepointSaver(store)).invoke({"notes": ["third"]}, cfg("r3"))
        assert after["notes"] == [*before.values["notes"], "third", "note 4", "reviewed"]
    verify_clean(tmp_path, url)


def test_prune_keeps_the_latest_checkpoint_and_verify_stays_clean(url: str, tmp_path: Path) -> None:
    with safepoint.open_store(url) as store:
        for turn in range(3):
            build(SafepointSaver(store)).invoke({"notes": [f"turn {turn}"]}, cfg())
        latest = build(SafepointSaver(store)).get_state(cfg())
        stored = len(store.history("langgraph/t"))
        SafepointSaver(store).prune(["t"])
        assert [t.config for t in SafepointSaver(store).list(cfg())] == [latest.config]
        assert build(SafepointSaver(store)).get_state(cfg()).values == latest.values
        assert len(store.history("langgraph/t")) == 2 < stored  # the copy and the switch
        assert len(store.history("langgraph-index/t")) == 1
        with pytest.raises(safepoint.InvalidArgument, match="strategy"):
            SafepointSaver(store).prune(["t"], strategy="keep_some")
    verify_clean(tmp_path, url)
    with safepoint.open_store(url) as store:
        SafepointSaver(store).prune(["t"], strategy="delete")
        assert store.runs(labels={"langgraph.thread_id": "t"}).items == []


def test_a_rebuild_cut_short_before_its_switch_changes_nothing_readers_see(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash between the rebuilt copies and the switch (simulated: the switch's save fails)
    leaves every read as it was; the next prune completes the job."""
    with safepoint.open_store(url) as store:
        for turn in range(3):
            build(SafepointSaver(store)).invoke({"notes": [f"turn {turn}"]}, cfg())
        listed = [(t.config, t.checkpoint["channel_values"]) for t in SafepointSaver(store).list(cfg())]

        class Cut(Exception):
            pass

        def cut_short(*args: Any, **kwargs: Any) -> Any:
            raise Cut

        with monkeypatch.context() as patch:
            patch.setattr(pruning, "_switch_builder", cut_short)
            with pytest.raises(Cut):
                SafepointSaver(store).prune(["t"])
        again = [(t.config, t.checkpoint["channel_values"]) for t in SafepointSaver(store).list(cfg())]
        assert again == listed
        SafepointSaver(store).prune(["t"])
        assert len(list(SafepointSaver(store).list(cfg()))) == 1
    verify_clean(tmp_path, url)
