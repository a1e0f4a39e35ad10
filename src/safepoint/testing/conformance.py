"""The backend conformance suite: DESIGN's invariants as tests, for every store.

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
hypothesis (the ``test`` extra).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from safepoint.errors import (
    Conflict,
    CorruptCheckpoint,
    InvalidArgument,
    LeaseLost,
    NotFound,
    NotJSONCompatible,
)
from safepoint.model import Checkpoint, Status
from safepoint.store import Store
from safepoint.store import ops as store_ops
from safepoint.store.facade import Driver

Tamper = Callable[[Store, str, int, str], None]


def snapshot(cp: Checkpoint) -> dict[str, Any]:
    """Everything a caller can see in a checkpoint, as plain data (for equality)."""
    data = cp.to_dict()
    data.pop("created_at")
    data.pop("digest")
    return data


def grow(store: Store, run_id: str, steps: int, per_step: int = 2) -> Checkpoint:
    """Save ``steps`` checkpoints of a run, each adding ``per_step`` messages."""
    cp = Checkpoint(run_id=run_id)
    for step in range(steps):
        cp.step = step
        for i in range(per_step):
            cp.messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"{step}.{i}"})
        cp.counters["steps"] = step + 1
        cp.cursors["batch"] = {"done": step}
        store.save(cp)
    return cp


def messages_written(queries: list[store_ops.Query]) -> int:
    """How many messages a save's queries appended to the message log."""
    return sum(q.params.get("added", 0) for q in queries if q.name == "insert_checkpoint")


class QueryLog:
    """Wraps a store's driver and records every named query its operations issue."""

    def __init__(self, store: Store) -> None:
        self.queries: list[store_ops.Query] = []
        self._inner: Driver = store.driver
        store._driver = self  # type: ignore[assignment]  # test-only interception

    @property
    def dialect(self) -> str:
        return self._inner.dialect

    def run(self, op: store_ops.Op[Any], *, write: bool) -> Any:
        return self._inner.run(self._record(op), write=write)

    def _record(self, op: store_ops.Op[Any]) -> store_ops.Op[Any]:
        rows: Any = None
        while True:
            try:
                query = op.send(rows)
            except StopIteration as stop:
                return stop.value
            self.queries.append(query)
            rows = yield query

    def close(self) -> None:
        self._inner.close()

    def take(self) -> list[store_ops.Query]:
        taken, self.queries = self.queries, []
        return taken


class StoreConformance:
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
        store.save(cp)
        assert snapshot(reopen().load("round-trip ✓")) == expected

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
        store.save(cp)
        cp = cp.next()
        cp.schema_version = 3
        store.save(cp)
        assert [i.schema_version for i in store.history("versions")] == [2, 3]
        assert store.load("versions", 0).schema_version == 2

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

    # -- invariant 7: fenced (claims and leases) ---------------------------------

    def test_claim_takes_queued_runs_only(self, store: Store) -> None:
        """claim returns None with nothing queued, and takes queued runs oldest first."""
        assert store.claim("w1") is None
        with pytest.raises(NotFound):
            store.enqueue("absent")
        for name in ("q1", "q2"):
            grow(store, name, 1)
            store.enqueue(name)
            store.enqueue(name)  # idempotent: keeps its place
        first = store.claim("w1", lease=30)
        second = store.claim("w2", lease=30)
        assert first is not None
        assert second is not None
        assert (first.run_id, second.run_id) == ("q1", "q2")
        assert first.epoch == 1
        assert store.claim("w3") is None  # both leases are live

    def test_stale_owner_is_fenced_off(self, store: Store) -> None:
        """Once another worker claims an expired lease, a stale owner's save is LeaseLost (no change)."""
        cp = grow(store, "fenced", 1)
        store.enqueue("fenced")
        old = store.claim("w-old", lease=0.05)
        assert old is not None
        time.sleep(0.1)
        new = store.claim("w-new", lease=30)
        assert new is not None
        assert (new.run_id, new.epoch) == ("fenced", old.epoch + 1)
        stale = cp.next()
        stale.messages.append({"role": "user", "content": "from the stale owner"})
        with pytest.raises(LeaseLost) as caught:
            store.save(stale, lease=old)
        assert "w-new" in str(caught.value)
        with pytest.raises(LeaseLost):
            store.heartbeat(old)
        with pytest.raises(LeaseLost):
            store.release(old)
        assert store.load("fenced").step == 0
        fresh = store.load("fenced").next()
        fresh.messages.append({"role": "user", "content": "from the new owner"})
        store.save(fresh, lease=new)
        assert [m["content"] for m in store.load("fenced").messages][-1] == "from the new owner"

    def test_unleased_save_cannot_bypass_a_live_lease(self, store: Store) -> None:
        """A save without the lease on a run leased to a worker is a Conflict."""
        cp = grow(store, "held", 1)
        store.enqueue("held")
        lease = store.claim("w1", lease=30)
        assert lease is not None
        with pytest.raises(Conflict, match="leased by worker 'w1'"):
            store.save(cp.next())
        with pytest.raises(InvalidArgument):
            store.save(Checkpoint(run_id="other"), lease=lease)

    def test_heartbeat_and_release(self, store: Store) -> None:
        """heartbeat extends a lease; release frees the run, requeued or not, with an optional status."""
        grow(store, "hb", 1)
        store.enqueue("hb")
        lease = store.claim("w1", lease=5)
        assert lease is not None
        renewed = store.heartbeat(lease, extend=60)
        assert renewed.expires_at > lease.expires_at
        assert renewed.epoch == lease.epoch
        store.release(renewed, requeue=True)
        again = store.claim("w2", lease=5)
        assert again is not None
        assert again.epoch == lease.epoch + 1
        store.release(again, status="done")
        assert store.claim("w3") is None
        assert store.run("hb").status is Status.DONE

    def test_concurrent_claimers_never_share_a_run(self, store: Store, reopen: Callable[[], Store]) -> None:
        """Eight claimers racing over 24 queued runs: every run is claimed exactly once."""
        for n in range(24):
            grow(store, f"job-{n}", 1)
            store.enqueue(f"job-{n}")
        claimed: list[tuple[str, int]] = []
        lock = threading.Lock()

        def claimer(n: int) -> None:
            own = reopen()
            while (lease := own.claim(f"w{n}", lease=60)) is not None:
                with lock:
                    claimed.append((lease.run_id, lease.epoch))

        threads = [threading.Thread(target=claimer, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(claimed) == sorted((f"job-{n}", 1) for n in range(24))

    # -- the rest of the API ----------------------------------------------------

    def test_missing_runs_and_steps_raise_not_found(self, store: Store) -> None:
        """load/history/delete of an unknown run, or an unknown step, raise NotFound (a LookupError)."""
        grow(store, "present", 2)
        for call in (
            lambda: store.load("absent"),
            lambda: store.load("present", 5),
            lambda: store.history("absent"),
            lambda: store.delete_run("absent"),
            lambda: store.fork("absent"),
        ):
            with pytest.raises(NotFound):
                call()
        with pytest.raises(LookupError):
            store.load("absent")

    def test_history_lists_every_step(self, store: Store) -> None:
        """history returns one header per step, oldest first, with message counts."""
        grow(store, "hist", 4)
        infos = store.history("hist")
        assert [(i.step, i.message_count) for i in infos] == [(0, 2), (1, 4), (2, 6), (3, 8)]
        assert all(len(i.digest) == 64 for i in infos)

    def test_runs_filters_and_pages(self, store: Store) -> None:
        """runs() filters by status and labels and pages without gaps or repeats."""
        for n in range(7):
            cp = Checkpoint(run_id=f"run-{n}", labels={"team": "a" if n % 2 else "b"})
            cp.status = Status.DONE if n < 3 else Status.RUNNING
            store.save(cp)
        assert {r.run_id for r in store.runs(status="done")} == {"run-0", "run-1", "run-2"}
        assert {r.run_id for r in store.runs(labels={"team": "a"})} == {"run-1", "run-3", "run-5"}
        assert {r.run_id for r in store.runs(status=["done"], labels={"team": "a"})} == {"run-1"}
        seen: list[str] = []
        cursor = None
        while True:
            page = store.runs(limit=3, cursor=cursor)
            seen.extend(r.run_id for r in page)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == [f"run-{n}" for n in reversed(range(7))]
        latest = store.runs(limit=1).items[0]
        assert store.runs(updated_since=latest.updated_at).items[0].run_id == latest.run_id

    def test_fork_starts_a_new_run_from_a_checkpoint(self, store: Store) -> None:
        """fork copies a checkpoint into a new run that records its parent and continues alone."""
        grow(store, "origin", 5)
        forked = store.fork("origin", 2, new_run_id="branch", labels={"kind": "fork"})
        assert forked.parent is not None
        assert (forked.parent.run_id, forked.parent.step) == ("origin", 2)
        assert forked.messages == store.load("origin", 2).messages
        nxt = forked.next()
        nxt.messages.append({"role": "user", "content": "only in the branch"})
        store.save(nxt)
        assert [i.step for i in store.history("branch")] == [2, 3]
        assert store.run("branch").parent == forked.parent
        assert len(store.load("origin").messages) == 10
        with pytest.raises(Conflict):
            store.fork("origin", new_run_id="branch")

    def test_delete_run_removes_everything(self, store: Store) -> None:
        """delete_run removes the run; the id can then start again from step 0."""
        grow(store, "doomed", 3)
        store.delete_run("doomed")
        with pytest.raises(NotFound):
            store.load("doomed")
        grow(store, "doomed", 2)
        assert store.load("doomed").step == 1

    def test_save_after_the_run_was_deleted_starts_over_cleanly(self, store: Store) -> None:
        """A checkpoint object whose run was deleted can't write into a recreated run's log."""
        old = grow(store, "reborn", 3)
        store.delete_run("reborn")
        grow(store, "reborn", 3)
        stale = old.next()
        stale.messages.append({"role": "user", "content": "stale"})
        store.save(stale)  # step 3 is the next step of the recreated run
        assert snapshot(store.load("reborn"))["messages"] == snapshot(stale)["messages"]

    @pytest.mark.parametrize(
        ("field", "value", "path"),
        [
            ("state", {"items": [1, (2, 3)]}, r"state\.items\[1\]: tuple"),
            ("cursors", {"when": object()}, r"cursors\.when: object"),
            ("state", {1: "x"}, r"state\[1\]: dict key of type int"),
            ("state", {"f": float("nan")}, r"state\.f: float nan"),
            ("counters", {"tokens": "12"}, r"counters\.tokens: str is not a number"),
            ("labels", {"team": 3}, r"labels\.team: int is not a str"),
            ("labels", {"team": "a\x00b"}, r"labels\['team'\]: NUL characters are not allowed"),
            ("counters", {"to\x00kens": 1}, r"counters\['to\\x00kens'\]: NUL characters"),
        ],
    )
    def test_non_json_values_are_refused_by_path(
        self, store: Store, field: str, value: Any, path: str
    ) -> None:
        """A value that is not JSON data is refused before any write, naming its path."""
        cp = Checkpoint(run_id="bad")
        setattr(cp, field, value)
        with pytest.raises(NotJSONCompatible, match=path):
            store.save(cp)
        with pytest.raises(NotFound):
            store.load("bad")

    def test_bad_ids_and_steps_are_refused_before_any_query(self, store: Store) -> None:
        """Run ids with NUL or lone surrogates, empty ids and negative steps raise InvalidArgument."""
        for bad in ("", "x\ud800", "nul\x00", "x" * 256):
            with pytest.raises(InvalidArgument):
                store.save(Checkpoint(run_id=bad))
            with pytest.raises(InvalidArgument):
                store.load(bad)
            with pytest.raises(InvalidArgument):
                store.history(bad)
        with pytest.raises(InvalidArgument):
            store.load("fine", -1)
        with pytest.raises(InvalidArgument):
            store.claim("worker\ud800")

    def test_bad_message_is_refused_by_path(self, store: Store) -> None:
        """A message that is not a dict, or holds a bad value, is refused naming its index."""
        not_a_message: Any = "not a dict"
        cp = Checkpoint(run_id="bad-msg", messages=[{"role": "user", "content": "ok"}, not_a_message])
        with pytest.raises(NotJSONCompatible, match=r"messages\[1\]"):
            store.save(cp)
        cp.messages = [{"role": "user", "content": "lone \ud800 surrogate"}]
        with pytest.raises(NotJSONCompatible, match=r"messages\[0\]\.content: str contains a lone surrogate"):
            store.save(cp)
        cp.messages = [{"role": "user", "content": {"key \udfff": 1}}]
        with pytest.raises(NotJSONCompatible, match=r"messages\[0\]\.content.*lone surrogate"):
            store.save(cp)

    # -- property: any sequence of edits loads back exactly ----------------------

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.differing_executors,
        ],
    )
    @given(
        edits=st.lists(
            st.tuples(
                st.sampled_from(["append", "replace", "delete", "assign", "pop", "insert"]),
                st.integers(0, 50),
            ),
            min_size=1,
            max_size=25,
        )
    )
    def test_any_edit_sequence_loads_back_exactly(self, store: Store, edits: list[tuple[str, int]]) -> None:
        """Random appends, replacements, deletions and reassignments: every step loads as saved."""
        run_id = f"prop-{next(_counter)}"
        cp = Checkpoint(run_id=run_id)
        expected: list[list[dict[str, Any]]] = []
        for step, (kind, n) in enumerate(edits):
            if step:
                cp = cp.next()
            _apply_edit(cp, kind, n, step)
            cp.counters["edits"] = step
            store.save(cp)
            expected.append(copy.deepcopy(list(cp.messages)))
        for step, messages in enumerate(expected):
            assert store.load(run_id, step).messages == messages


def _apply_edit(cp: Checkpoint, kind: str, n: int, step: int) -> None:
    msgs = cp.messages
    new = {"role": "user", "content": f"s{step} n{n}"}
    if kind == "append" or not msgs:
        msgs.extend(dict(new, i=i) for i in range(n % 4 + 1))
    elif kind == "replace":
        msgs[n % len(msgs)] = new
    elif kind == "delete":
        del msgs[n % len(msgs) :]
    elif kind == "pop":
        msgs.pop(n % len(msgs))
    elif kind == "insert":
        msgs.insert(n % len(msgs), new)
    else:
        cp.messages = [dict(m) for m in msgs[: n % (len(msgs) + 1)]] + [new]


def _counter_values() -> Iterator[int]:
    n = 0
    while True:
        n += 1
        yield n


_counter = _counter_values()
