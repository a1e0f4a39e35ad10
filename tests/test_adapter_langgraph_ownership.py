"""LangGraph's proposed write-ownership contract on SafepointSaver, clause by clause.

The contract (langgraph issue #8796, PR #8894, not in the released conformance package): a
saver that offers write ownership (``aclaim_write_ownership``) must refuse every write of a
superseded owner, with an error marked ``is_stale_write_owner_error = True``; a superseded
owner's write never becomes durable; ownership is per thread and monotonic. Our reading of it
is the fifteen clauses below (``CLAUSE n``), each a test, each on SQLite and on PostgreSQL
(a schema of its own), with fresh savers standing in for the workers of a fleet.
"""

from __future__ import annotations

import asyncio
import operator
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from safepoint import Conflict, SafepointError
from safepoint.adapters.langgraph import SafepointSaver
from safepoint.adapters.langgraph.ownership import StaleWriteOwner

THREAD = "ticket-7 \u202e'; DROP TABLE safepoint_runs; --"  # hostile, and must never be quoted


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'owned.db'}"
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        yield f"{dsn}?schema={schema}"


@pytest.fixture
def store(url: str) -> Iterator[safepoint.Store]:
    with safepoint.open_store(url) as opened:
        yield opened


def config(thread: str = THREAD, ns: str = "", checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def put(saver: SafepointSaver, thread: str = THREAD, ns: str = "", writer: str = "") -> RunnableConfig:
    return saver.put(config(thread, ns), generate_checkpoint(), {"writer": writer}, {})  # type: ignore[typeddict-unknown-key]


def steps(store: safepoint.Store, thread: str = THREAD) -> int:
    return sum(
        len(store.history(run.run_id)) for run in store.runs(labels={"langgraph.thread_id": thread}).items
    )


def refused(call: Any, *args: Any) -> StaleWriteOwner:
    with pytest.raises(StaleWriteOwner) as caught:
        call(*args)
    assert caught.value.is_stale_write_owner_error is True
    return caught.value


def test_clause_01_the_owner_writes(store: safepoint.Store) -> None:
    """CLAUSE 1: a claim returns an epoch, and the claiming saver's put and put_writes are stored."""
    owner = SafepointSaver(store)
    claimed = owner.claim_write_ownership(THREAD)
    assert claimed.epoch >= 1
    stored = put(owner)
    owner.put_writes(stored, [("ch", "value")], "task-1")
    assert owner.get_tuple(config()).pending_writes == [("task-1", "ch", "value")]  # type: ignore[union-attr]


def test_clause_02_a_superseded_put_is_refused_and_leaves_nothing(store: safepoint.Store) -> None:
    """CLAUSE 2: once another saver's claim returns, the first owner's put is refused, nothing stored."""
    first, second = SafepointSaver(store), SafepointSaver(store)
    first.claim_write_ownership(THREAD)
    put(first)
    second.claim_write_ownership(THREAD)
    before = steps(store)
    refused(put, first)
    assert steps(store) == before


def test_clause_03_a_superseded_put_writes_is_refused(store: safepoint.Store) -> None:
    """CLAUSE 3: the same for put_writes: the pending writes never land."""
    first, second = SafepointSaver(store), SafepointSaver(store)
    first.claim_write_ownership(THREAD)
    stored = put(first)
    second.claim_write_ownership(THREAD)
    refused(first.put_writes, stored, [("ch", "stale")], "task-1")
    assert SafepointSaver(store).get_tuple(stored).pending_writes == []  # type: ignore[union-attr]


def test_clause_04_a_superseded_owner_cannot_delete_the_thread(store: safepoint.Store) -> None:
    """CLAUSE 4: delete_thread is a write: a superseded owner's is refused, the thread intact."""
    first, second = SafepointSaver(store), SafepointSaver(store)
    first.claim_write_ownership(THREAD)
    put(first)
    second.claim_write_ownership(THREAD)
    refused(first.delete_thread, THREAD)
    assert second.get_tuple(config()) is not None
    second.delete_thread(THREAD)
    assert second.get_tuple(config()) is None


def test_clause_05_the_new_owner_writes_on_the_latest_durable_state(store: safepoint.Store) -> None:
    """CLAUSE 5: the new owner writes, on top of everything the old owner made durable."""
    first, second = SafepointSaver(store), SafepointSaver(store)
    first.claim_write_ownership(THREAD)
    made = put(first)
    second.claim_write_ownership(THREAD)
    assert second.get_tuple(config()).config == made  # type: ignore[union-attr]
    newer = put(second)
    assert SafepointSaver(store).get_tuple(config()).config == newer  # type: ignore[union-attr]


def test_clause_06_epochs_only_grow(url: str) -> None:
    """CLAUSE 6: every claim's epoch is higher than all before it — by fresh savers on fresh store
    objects (other processes' view), and by the same saver claiming again."""
    epochs = []
    for _ in range(3):
        with safepoint.open_store(url) as store:
            epochs.append(SafepointSaver(store).claim_write_ownership(THREAD).epoch)
    with safepoint.open_store(url) as store:
        saver = SafepointSaver(store)
        epochs += [saver.claim_write_ownership(THREAD).epoch, saver.claim_write_ownership(THREAD).epoch]
        put(saver)  # its newest claim is the current one
    assert epochs == sorted(set(epochs))


def test_clause_07_ownership_is_per_thread(store: safepoint.Store) -> None:
    """CLAUSE 7: a claim of one thread changes nothing for the writers of any other."""
    first, second, loose = SafepointSaver(store), SafepointSaver(store), SafepointSaver(store)
    first.claim_write_ownership("other")
    second.claim_write_ownership(THREAD)
    first.claim_write_ownership(THREAD)  # first takes THREAD back: second is superseded there only
    put(first, "other")
    put(loose, "unclaimed")
    refused(put, second)
    assert second.get_tuple(config("other")) is not None  # and reads everything


def test_clause_08_a_superseded_write_to_a_subgraph_namespace_is_refused(store: safepoint.Store) -> None:
    """CLAUSE 8: ownership is the thread's, every namespace included (a subgraph's checkpoints)."""
    first, second = SafepointSaver(store), SafepointSaver(store)
    first.claim_write_ownership(THREAD)
    put(first, ns="child:1")
    second.claim_write_ownership(THREAD)
    before = steps(store)
    refused(put, first, THREAD, "child:1")
    assert steps(store) == before
    put(second, ns="child:1")


def test_clause_09_a_superseded_owner_cannot_open_a_new_namespace(store: safepoint.Store) -> None:
    """CLAUSE 9: nor a namespace the thread never used: the stale write creates nothing."""
    first, second = SafepointSaver(store), SafepointSaver(store)
    first.claim_write_ownership(THREAD)
    put(first)
    second.claim_write_ownership(THREAD)
    refused(put, first, THREAD, "never-seen:2")
    assert second.get_tuple(config(ns="never-seen:2")) is None


def test_clause_10_a_saver_that_never_claimed_cannot_write_an_owned_thread(store: safepoint.Store) -> None:
    """CLAUSE 10: ownership is opt-in per saver, but an owned thread refuses unowned writers."""
    owner, loose = SafepointSaver(store), SafepointSaver(store)
    owner.claim_write_ownership(THREAD)
    put(owner, ns="child:1")
    error = refused(put, loose)
    assert error.mine is None
    refused(put, loose, THREAD, "child:1")  # the claim sealed the namespace it knew


def test_clause_11_release_hands_the_thread_back(store: safepoint.Store) -> None:
    """CLAUSE 11: after a release the released owner is refused, unowned savers write again,
    and the next claim's epoch is higher than any before it."""
    owner, loose = SafepointSaver(store), SafepointSaver(store)
    epoch = owner.claim_write_ownership(THREAD).epoch
    owner.release_write_ownership(THREAD)
    put(loose)  # nobody holds it
    assert SafepointSaver(store).claim_write_ownership(THREAD).epoch > epoch
    refused(put, loose)


def test_clause_12_reads_are_never_refused_and_change_nothing(store: safepoint.Store) -> None:
    """CLAUSE 12: a superseded owner still reads (get_tuple, list), and reading writes nothing."""
    first, second = SafepointSaver(store), SafepointSaver(store)
    first.claim_write_ownership(THREAD)
    made = put(first)
    second.claim_write_ownership(THREAD)
    before = steps(store)
    assert first.get_tuple(config()).config == made  # type: ignore[union-attr]
    assert [t.config for t in first.list(config())] == [made]
    assert steps(store) == before


def test_clause_13_of_concurrent_claims_exactly_the_last_one_writes(url: str) -> None:
    """CLAUSE 13: eight workers claim at once: eight distinct epochs; only the highest writes."""
    results: dict[int, SafepointSaver] = {}
    barrier = threading.Barrier(8, timeout=120)  # a worker that died breaks it: the others stop too
    stores = [safepoint.open_store(url) for _ in range(8)]  # eight workers, each its own store

    def worker(store: safepoint.Store) -> None:
        saver = SafepointSaver(store)
        barrier.wait()
        epoch = saver.claim_write_ownership(THREAD).epoch
        results[epoch] = saver
        barrier.wait()  # every claim has returned
        try:
            put(saver, writer=str(epoch))
        except StaleWriteOwner:
            return
        results[-1] = saver

    threads = [threading.Thread(target=worker, args=(store,)) for store in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for store in stores:
        store.close()
    epochs = sorted(e for e in results if e > 0)
    assert len(epochs) == 8
    assert results[-1] is results[epochs[-1]]  # the winner is the highest epoch, and only it


def test_clause_14_a_write_racing_a_claim_lands_before_it_or_never(url: str) -> None:
    """CLAUSE 14: an owner writing as fast as it can while another claims: each write it saw
    succeed is in the thread before the claim's step, and every write after is refused."""
    with safepoint.open_store(url) as store:
        first = SafepointSaver(store)
        first.claim_write_ownership(THREAD)
        put(first)
        done = threading.Event()
        landed: list[str] = []

        def keep_writing() -> None:
            while True:
                try:
                    landed.append(put(first, writer="first")["configurable"]["checkpoint_id"])
                except StaleWriteOwner:
                    done.set()
                    return
                # A graph's own work between two saves; a writer with none at all could win every
                # race for the next step, and the claim would give up (Conflict after 50 attempts).
                time.sleep(0.002)

        writer = threading.Thread(target=keep_writing)
        writer.start()
        while len(landed) < 3:
            time.sleep(0.001)
        with safepoint.open_store(url) as other:
            epoch = SafepointSaver(other).claim_write_ownership(THREAD).epoch
            writer.join(timeout=60)
            assert done.is_set()
            run_id = f"langgraph/{quote(THREAD, safe=':|')}"
            states = [(info.step, other.load(run_id, info.step).state) for info in other.history(run_id)]
        claim_step = next(step for step, state in states if (state.get("owner") or {}).get("epoch") == epoch)
        first_step: dict[str, int] = {}
        for step, state in states:  # a later step may repeat a checkpoint (a claim's step does)
            first_step.setdefault(state.get("id"), step)
        assert all(first_step[cid] < claim_step for cid in landed)


class Notes(TypedDict):
    notes: Annotated[list[str], operator.add]


def graph(saver: SafepointSaver) -> Any:
    builder = StateGraph(Notes)
    builder.add_node("write", lambda s: {"notes": [f"note {len(s['notes'])}"]})
    builder.add_edge(START, "write")
    builder.add_edge("write", END)
    return builder.compile(checkpointer=saver)


def test_clause_15_typed_error_unquoted_and_a_real_graph_on_async_savers(url: str) -> None:
    """CLAUSE 15: the refusal is a typed safepoint error (a Conflict) that quotes no value, and it
    reaches a superseded worker's ``graph.ainvoke`` through LangGraph, on async stores, while the
    new owner's graph goes on from the last durable state."""

    async def scenario() -> None:
        async with await safepoint.open_async_store(url) as one, await safepoint.open_async_store(url) as two:
            first, second = SafepointSaver(one), SafepointSaver(two)
            await first.aclaim_write_ownership(THREAD)
            await graph(first).ainvoke({"notes": ["a"]}, config())
            await second.aclaim_write_ownership(THREAD)
            with pytest.raises(StaleWriteOwner) as caught:
                await graph(first).ainvoke({"notes": ["stale"]}, config())
            error = caught.value
            assert isinstance(error, Conflict)
            assert isinstance(error, SafepointError)
            assert THREAD not in str(error)
            assert "ticket" not in str(error)
            out = await graph(second).ainvoke({"notes": ["b"]}, config())
            assert out["notes"] == ["a", "note 1", "b", "note 3"]

    asyncio.run(scenario())
