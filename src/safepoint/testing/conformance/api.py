"""Conformance: the store API beyond the invariants — lookups, listing, fork,
delete, refusals of bad input, and a property test of arbitrary edit sequences.

Mixed into ``StoreConformance``; uses its ``store`` fixture.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from safepoint.errors import Conflict, InvalidArgument, NotFound, NotJSONCompatible
from safepoint.model import Checkpoint, Status
from safepoint.store import Store

from .runs import grow, snapshot


class ApiConformance:
    """The rest of the store's contract, the same on every backend."""

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
        first = store.run("run-0").updated_at  # both ends of the range are included
        assert [r.run_id for r in store.runs(updated_since=first, updated_until=first)] == ["run-0"]
        assert "run-0" not in {r.run_id for r in store.runs(updated_since=latest.updated_at)}
        assert "run-6" not in {r.run_id for r in store.runs(updated_until=first)}

    def test_runs_by_run_id_prefix_take_wildcards_as_data(self, store: Store) -> None:
        """runs(run_id_prefix=...) matches the start of the id exactly: ``%`` and ``_`` are characters."""
        for run_id in ("job-1", "job_2", "job%3", "jobs", "other"):
            store.save(Checkpoint(run_id=run_id))
        assert [r.run_id for r in store.runs(run_id_prefix="job%")] == ["job%3"]
        assert [r.run_id for r in store.runs(run_id_prefix="job_")] == ["job_2"]
        assert {r.run_id for r in store.runs(run_id_prefix="job")} == {"job-1", "job_2", "job%3", "jobs"}
        first = store.runs(run_id_prefix="job", limit=2)
        rest = store.runs(run_id_prefix="job", limit=2, cursor=first.next_cursor)
        assert len({r.run_id for r in [*first, *rest]}) == 4

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
