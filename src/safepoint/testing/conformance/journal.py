"""Conformance: the call journal (``record_call``, ``call_intent``, ``recorded_call``,
``recorded_calls``), for every store — put if absent, the first result wins, fenced by the
run's lease like a save, and an entry lives as long as the checkpoint of its step.

Mixed into ``StoreConformance``; uses its ``store`` and ``reopen`` fixtures.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from safepoint.errors import InvalidArgument, LeaseLost, NotFound, NotJSONCompatible, RunHeld
from safepoint.model import Checkpoint, Status
from safepoint.records import Retention
from safepoint.store import Store

from .runs import grow


def _save_next(store: Store, run_id: str) -> None:
    cp = store.load(run_id).next()
    cp.messages.append({"role": "assistant", "content": f"step {cp.step}"})
    store.save(cp)


class JournalConformance:
    """A run's recorded calls: written once, fenced, kept and deleted with their checkpoints."""

    def test_journal_intent_then_result_put_if_absent(self, store: Store) -> None:
        """An intent, then its result, each written once; an entry belongs to the head's next step."""
        grow(store, "journal", 2)
        intent = store.call_intent("journal", "pay#1", request={"amount": 5})
        assert (intent.state, intent.step, intent.written, intent.result) == ("intent", 2, True, None)
        assert store.call_intent("journal", "pay#1").written is False
        done = store.record_call("journal", "pay#1", {"paid": 5}, request={"amount": 5})
        assert (done.state, done.step, done.written, done.result) == ("done", 2, True, {"paid": 5})
        found = store.recorded_call("journal", "pay#1", request={"amount": 5})
        assert found is not None
        assert (found.state, found.result, found.same_request) == ("done", {"paid": 5}, True)
        assert store.recorded_call("journal", "pay#1", request={"amount": 6}).same_request is False  # type: ignore[union-attr]
        assert store.recorded_call("journal", "never") is None
        assert [(e.key, e.state) for e in store.recorded_calls("journal")] == [("pay#1", "done")]

    def test_journal_first_result_wins(self, store: Store) -> None:
        """A second result under a key is not written: its writer gets the first one back."""
        grow(store, "journal", 1)
        first = store.record_call("journal", "model#1", {"text": "first"})
        second = store.record_call("journal", "model#1", {"text": "second"})
        assert (first.written, second.written) == (True, False)
        assert second.result == {"text": "first"}
        assert store.call_intent("journal", "model#1").result == {"text": "first"}
        assert store.recorded_call("journal", "model#1").result == {"text": "first"}  # type: ignore[union-attr]

    def test_journal_racing_writers_keep_one_result(self, store: Store, reopen: Callable[[], Store]) -> None:
        """Six writers racing over eight keys: each key is written once, every writer gets its result."""
        grow(store, "journal", 1)
        handles = [reopen() for _ in range(6)]
        start = threading.Barrier(len(handles))
        seen: dict[str, list[tuple[bool, object]]] = {f"key-{k}": [] for k in range(8)}
        lock = threading.Lock()

        def writer(n: int) -> None:
            start.wait()
            for key, outcomes in seen.items():
                entry = handles[n].record_call("journal", key, {"writer": n})
                with lock:
                    outcomes.append((entry.written, entry.result))

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(len(handles))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for key, outcomes in seen.items():
            winners = [result for written, result in outcomes if written]
            assert len(outcomes) == len(handles)
            assert len(winners) == 1, key
            assert all(result == winners[0] for _, result in outcomes), key
            assert store.recorded_call("journal", key).result == winners[0]  # type: ignore[union-attr]

    def test_journal_is_fenced_like_a_save(self, store: Store) -> None:
        """Without a lease while another writer's lives: RunHeld; under a stale one: LeaseLost;
        a missing run: NotFound. Nothing refused is written."""
        grow(store, "journal", 1)
        with pytest.raises(NotFound):
            store.record_call("absent", "k", 1)
        with pytest.raises(NotFound):
            store.call_intent("absent", "k")
        store.enqueue("journal")
        # A lease long enough to outlast the two calls below on a loaded machine (a 50 ms
        # one did not), then waited out, so the next claim takes the run over.
        claimed_at = time.monotonic()
        old = store.claim("w-old", lease=1.0)
        assert old is not None
        with pytest.raises(RunHeld):
            store.record_call("journal", "k", 1)
        entry = store.call_intent("journal", "k", lease=old)
        assert (entry.writer, entry.epoch, entry.writer_live) == ("w-old", old.epoch, True)
        time.sleep(max(0.0, claimed_at + 1.1 - time.monotonic()))
        new = store.claim("w-new", lease=30)
        assert new is not None
        with pytest.raises(LeaseLost):
            store.record_call("journal", "k", "stale", lease=old)
        with pytest.raises(LeaseLost):
            store.call_intent("journal", "other", lease=old)
        assert store.recorded_call("journal", "other") is None
        assert store.recorded_call("journal", "k").state == "intent"  # type: ignore[union-attr]
        assert store.record_call("journal", "k", "fresh", lease=new).result == "fresh"
        with pytest.raises(InvalidArgument):
            store.record_call("journal", "", 1, lease=new)
        with pytest.raises(NotJSONCompatible):
            store.record_call("journal", "bad", {1, 2}, lease=new)
        assert [e.key for e in store.recorded_calls("journal")] == ["k"]

    def test_journal_entries_go_with_their_checkpoints(self, store: Store) -> None:
        """Retention deletes the entries of the steps it prunes, keeping kept and future steps'."""
        grow(store, "journal", 1)
        for step in range(1, 5):
            store.record_call("journal", f"k{step}", step)
            _save_next(store, "journal")
        store.record_call("journal", "future", 5)
        assert store.prune_run("journal", Retention(keep_last=2)).pruned_steps == [0, 1, 2]
        assert sorted(e.key for e in store.recorded_calls("journal")) == ["future", "k3", "k4"]
        assert store.recorded_call("journal", "k2") is None
        assert store.recorded_call("journal", "k3").result == 3  # type: ignore[union-attr]

    def test_journal_entries_go_with_their_run(self, store: Store) -> None:
        """Deleting a run deletes its entries (a run of that id again has none); a fork has none of
        its parent's; a finished run deleted by retention takes its entries with it."""
        grow(store, "journal", 2)
        store.record_call("journal", "k", "parent's")
        store.fork("journal", 1, new_run_id="journal-fork")
        assert store.recorded_calls("journal-fork") == []
        store.delete_run("journal")
        assert store.recorded_call("journal", "k") is None
        with pytest.raises(NotFound):
            store.recorded_calls("journal")
        grow(store, "journal", 1)
        assert store.recorded_calls("journal") == []
        done = Checkpoint(run_id="finished", status=Status.DONE)
        store.save(done)
        store.record_call("finished", "k", 1)
        assert store.prune_run("finished", Retention(delete_finished_after=timedelta(0))).run_deleted
        assert store.recorded_call("finished", "k") is None
