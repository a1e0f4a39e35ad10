"""The backend conformance suite's core: DESIGN's invariants as tests, for every store.

Subclass ``StoreConformance`` in a test module and provide three fixtures:

``store``
    a fresh, empty ``Store``;
``reopen``
    a callable returning another ``Store`` on the same data (a new
    connection, as a fresh process would open; ``memory://`` can only return
    the same store);
``tamper``
    a callable ``tamper(store, run_id, step, what)`` that damages the stored
    checkpoint the way a bad disk or a hand edit would, with ``what`` one of
    ``"header"`` (flip a byte of the header), ``"message"`` (alter one
    message row the checkpoint sees) and ``"drop_message"`` (delete one).

Every test's docstring says what it proves. The suite needs pytest and
hypothesis (the ``test`` extra). The invariants are here; the lease tests
(``leases.py``), the call journal (``journal.py``) and the rest of the API
(``api.py``) are mixed in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from safepoint.errors import Conflict, CorruptCheckpoint, NotJSONCompatible, SchemaTooNew
from safepoint.model import Checkpoint, Status
from safepoint.store import Store

from .api import ApiConformance
from .journal import JournalConformance
from .leases import LeaseConformance
from .listing import ListingConformance
from .query_log import QueryLog, messages_written
from .runs import Tamper, declaring, grow, snapshot


class StoreConformance(LeaseConformance, ApiConformance, ListingConformance, JournalConformance):
    """DESIGN's invariants and the store API contract, for one backend."""

    # -- invariant 1: atomic -------------------------------------------------

    def test_rejected_save_changes_nothing(self, store: Store) -> None:
        """A save refused for a bad value or a wrong step leaves the store exactly as it was."""
        cp = grow(store, "atomic", 3)
        before = [snapshot(store.load("atomic", s)) for s in range(3)]
        bad = cp.next()
        bad.messages.append({"role": "user", "content": "fine"})
        bad.state["items"] = [1, 2, 3, {4}]
        with pytest.raises(NotJSONCompatible, match=r"state\.items\[3\]: set is not JSON-compatible"):
            store.save(bad)
        skipped = cp.next()
        skipped.step += 1
        skipped.messages.append({"role": "user", "content": "skipped"})
        with pytest.raises(Conflict):
            store.save(skipped)
        assert [snapshot(store.load("atomic", s)) for s in range(3)] == before
        assert [i.step for i in store.history("atomic")] == [0, 1, 2]

    def test_save_is_visible_to_a_fresh_store(self, store: Store, reopen: Callable[[], Store]) -> None:
        """Once save returns, a new connection sees the checkpoint (durable, self-contained)."""
        cp = grow(store, "durable", 2)
        other = reopen()
        assert snapshot(other.load("durable")) == snapshot(cp)

    # -- invariant 2: self-contained ------------------------------------------

    def test_round_trip_of_every_field(self, store: Store, reopen: Callable[[], Store]) -> None:
        """Every field, including unicode, floats and nesting, loads exactly as it was saved."""
        cp = Checkpoint(
            run_id="round-trip ✓",
            schema_version=3,
            messages=[{"role": "user", "content": [{"type": "text", "text": "héllo 🌍 \u0000 nul"}]}],
            counters={"tokens_in": 12, "spend": 0.1 + 0.2, "big": 2**62},
            pending_action={"tool": "search", "args": {"q": "x"}, "key": "k-1"},
            cursors={"batch": {"done": 8, "total": 10}},
            state={"nested": {"a": [1, 2.5, None, True, "s"]}, "empty": {}, "neg": -0.0},
            status=Status.WAITING,
            labels={"team": "search", "env": "test"},
        )
        expected = snapshot(cp)
        with declaring(store, 3) as declared:
            declared.save(cp)
        assert snapshot(reopen().load("round-trip ✓", migrate=False)) == expected

    def test_save_does_not_change_the_callers_values(self, store: Store) -> None:
        """Saving keeps the caller's state, counters and messages equal to what they were."""
        cp = Checkpoint(run_id="caller", messages=[{"role": "user", "content": "x"}], state={"k": [1]})
        expected = snapshot(cp)
        store.save(cp)
        assert snapshot(cp) == expected

    # -- invariant 3: flat cost -----------------------------------------------

    def test_save_writes_only_new_messages(self, store: Store) -> None:
        """A save at step 200 writes the 2 new messages and one header, not the history."""
        cp = grow(store, "flat", 200)
        log = QueryLog(store)
        nxt = cp.next()
        nxt.messages.extend([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
        store.save(nxt)
        assert messages_written(log.take()) == 2

    def test_load_query_count_is_independent_of_run_length(self, store: Store) -> None:
        """Loading the latest checkpoint issues the same queries at step 5 and step 300."""
        grow(store, "short", 5)
        grow(store, "long", 300)
        log = QueryLog(store)
        store.load("short")
        short = [q.name for q in log.take()]
        store.load("long")
        assert [q.name for q in log.take()] == short
        assert len(short) <= 2

    def test_fresh_checkpoint_object_still_saves_only_the_delta(self, store: Store) -> None:
        """A checkpoint rebuilt from scratch (not from load/save) still appends only what is new."""
        grow(store, "rebuilt", 10)
        loaded = store.load("rebuilt")
        fresh = Checkpoint(run_id="rebuilt", step=10, messages=[dict(m) for m in loaded.messages])
        fresh.messages.append({"role": "user", "content": "new"})
        log = QueryLog(store)
        store.save(fresh)
        assert messages_written(log.take()) == 1
        assert snapshot(store.load("rebuilt"))["messages"] == snapshot(fresh)["messages"]

    # -- history rewrites ------------------------------------------------------

    def test_history_rewrite_keeps_older_checkpoints_exact(self, store: Store) -> None:
        """Replacing 200 old turns with a summary works, and every older checkpoint loads as saved."""
        cp = grow(store, "rewrite", 101)
        before = {s: snapshot(store.load("rewrite", s)) for s in (0, 50, 100)}
        summary = cp.next()
        summary.messages[:200] = [{"role": "system", "content": "summary of 200 turns"}]
        store.save(summary)
        after = summary.next()
        after.messages.append({"role": "user", "content": "next"})
        store.save(after)
        assert {s: snapshot(store.load("rewrite", s)) for s in (0, 50, 100)} == before
        latest = store.load("rewrite")
        assert latest.messages[0] == {"role": "system", "content": "summary of 200 turns"}
        assert len(latest.messages) == 4

    def test_saved_messages_are_frozen(self, store: Store) -> None:
        """Mutating a stored message in place fails loudly instead of going unsaved."""
        cp = grow(store, "frozen", 1)
        with pytest.raises(TypeError, match="immutable"):
            cp.messages[0]["content"] = "changed"
        cp = cp.next()
        cp.messages[0] = {**cp.messages[0], "content": "changed"}
        store.save(cp)
        assert store.load("frozen").messages[0]["content"] == "changed"
        assert store.load("frozen", 0).messages[0]["content"] == "0.0"

    # -- invariant 5: versioned -----------------------------------------------

    def test_schema_version_is_stored_per_checkpoint(self, store: Store) -> None:
        """Every checkpoint carries its own schema_version."""
        cp = Checkpoint(run_id="versions", schema_version=2)
        with declaring(store, 3) as declared:
            declared.save(cp)
            cp = cp.next()
            cp.schema_version = 3
            declared.save(cp)
            assert [i.schema_version for i in declared.history("versions")] == [2, 3]
            assert declared.load("versions", 0).schema_version == 2

    def test_newer_checkpoints_are_refused_but_read_raw(self, store: Store) -> None:
        """Code at version 2 refuses to save or to load (migrating) a version 3 checkpoint; raw reads work."""
        with declaring(store, 3) as declared:
            declared.save(Checkpoint(run_id="newer", schema_version=3))
        with declaring(store, 2) as declared:
            with pytest.raises(SchemaTooNew):
                declared.load("newer")
            assert declared.load("newer", migrate=False).schema_version == 3
            with pytest.raises(SchemaTooNew):
                declared.save(declared.load("newer", migrate=False).next())
            assert [i.step for i in declared.history("newer")] == [0]

    # -- invariant 6: verified --------------------------------------------------

    @pytest.mark.parametrize("what", ["header", "message", "drop_message"])
    def test_altered_rows_raise_corrupt_checkpoint(self, store: Store, tamper: Tamper, what: str) -> None:
        """An altered or torn stored checkpoint raises CorruptCheckpoint naming run and step."""
        grow(store, "tampered", 3)
        tamper(store, "tampered", 2, what)
        with pytest.raises(CorruptCheckpoint) as caught:
            store.load("tampered", 2)
        assert caught.value.run_id == "tampered"
        assert caught.value.step == 2
        assert "'tampered' step 2" in str(caught.value)

    @pytest.mark.parametrize("what", ["message", "drop_message"])
    def test_rows_altered_after_a_load_raise_corrupt_checkpoint(
        self, store: Store, tamper: Tamper, what: str
    ) -> None:
        """A message row altered after loads verified it (a store remembers rows it has hashed)
        still raises CorruptCheckpoint, for the latest checkpoint and by step."""
        grow(store, "seen", 3)
        for _ in range(2):
            assert store.load("seen").step == store.load("seen", 2).step == 2
        tamper(store, "seen", 2, what)
        for step in (None, 2):
            with pytest.raises(CorruptCheckpoint) as caught:
                store.load("seen", step)
            assert (caught.value.run_id, caught.value.step) == ("seen", 2)

    # -- invariant 7: ordered ---------------------------------------------------

    def test_only_the_next_step_is_accepted(self, store: Store) -> None:
        """Steps start at 0 and only move forward by one; anything else is a Conflict."""
        with pytest.raises(Conflict, match="must be step 0"):
            store.save(Checkpoint(run_id="order", step=1))
        cp = grow(store, "order", 2)
        for wrong in (0, 1, 3, 7):
            attempt = cp.next()
            attempt.step = wrong
            with pytest.raises(Conflict) as caught:
                store.save(attempt)
            assert caught.value.head == 1
        assert store.load("order").step == 1

    def test_concurrent_writers_of_one_step_exactly_one_wins(
        self, store: Store, reopen: Callable[[], Store]
    ) -> None:
        """Eight writers racing to save the same step: one succeeds, seven get Conflict."""
        grow(store, "race", 1)
        outcomes: list[str] = []
        barrier = threading.Barrier(8)

        def writer(n: int) -> None:
            own = reopen()
            cp = own.load("race").next()
            cp.messages.append({"role": "user", "content": f"writer {n}"})
            barrier.wait()
            try:
                own.save(cp)
                outcomes.append("saved")
            except Conflict:
                outcomes.append("conflict")

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["conflict"] * 7 + ["saved"]
        assert len(store.load("race").messages) == 3
