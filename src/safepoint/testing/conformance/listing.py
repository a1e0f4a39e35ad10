"""The conformance suite's listing orders and sums: ``runs(sort=...)`` pages and ``counter_sums``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from safepoint.errors import InvalidArgument
from safepoint.model import Checkpoint, Status
from safepoint.records import RunInfo
from safepoint.store import Store

# Ids a careless listing would order, escape or page wrongly: markup, controls, bidi,
# SQL wildcards, case, accents and scripts beyond Latin-1, a long one.
HOSTILE_IDS = [
    "<script>alert(1)</script>",
    "\x1b[31mred\x07",
    "z\u202eevil",
    "a%_",
    "'; DROP TABLE safepoint_runs; --",
    "A",
    "a",
    "B",
    "é",
    "日本",
    "a b",
    "🙂",
    "x" * 255,
]
SORT_KEYS: dict[str, Callable[[RunInfo], Any]] = {
    "created": lambda run: 0,
    "updated": lambda run: run.updated_at,
    "run_id": lambda run: run.run_id,
    "status": lambda run: run.status.value,
    "step": lambda run: run.head_step,
}


def _fill(store: Store) -> list[str]:
    """Runs whose keys tie (three steps, two statuses, shared update times are likely)."""
    ids = HOSTILE_IDS + [f"r{n:02d}" for n in range(12)]
    for n, run_id in enumerate(ids):
        cp = Checkpoint(run_id=run_id, labels={"team": "a" if n % 2 else "b"})
        cp.status = Status.DONE if n % 3 == 0 else Status.RUNNING
        cp.counters = {"tokens_in": n, "spend": 0.5}
        store.save(cp)
        for _ in range(n % 3):
            cp = cp.next()
            store.save(cp)
    return ids


def _pages(store: Store, **options: object) -> list[RunInfo]:
    seen: list[RunInfo] = []
    cursor = None
    while True:
        page = store.runs(limit=4, cursor=cursor, **options)  # type: ignore[arg-type]
        seen.extend(page)
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor


class ListingConformance:
    @pytest.mark.parametrize("sort", list(SORT_KEYS))
    def test_runs_sorted_pages_list_every_run_once_in_order(self, store: Store, sort: str) -> None:
        """runs(sort=...) pages the whole store in the key's order, both ways: every run exactly once,
        ties broken by creation, hostile ids as data, and a filter keeps the order."""
        ids = _fill(store)
        created = [run.run_id for run in _pages(store)][::-1]  # the default listing: newest first
        rank = {run_id: n for n, run_id in enumerate(created)}
        for descending in (True, False):
            runs = _pages(store, sort=sort, descending=descending)
            assert sorted(run.run_id for run in runs) == sorted(ids)
            keys = [(SORT_KEYS[sort](run), rank[run.run_id]) for run in runs]
            assert keys == sorted(keys, reverse=descending)
            done = _pages(store, sort=sort, descending=descending, status="done", labels={"team": "b"})
            assert [r.run_id for r in done] == [
                r.run_id for r in runs if r.status is Status.DONE and r.labels == {"team": "b"}
            ]

    def test_runs_sorted_cursor_belongs_to_its_sort(self, store: Store) -> None:
        """A sorted page's cursor is refused under another sort or direction, and a forged one too."""
        _fill(store)
        cursor = store.runs(limit=2, sort="run_id").next_cursor
        assert cursor is not None
        for options in ({"sort": "status"}, {"sort": "run_id", "descending": False}, {}):
            with pytest.raises(InvalidArgument):
                store.runs(limit=2, cursor=cursor, **options)
        for bad in (cursor[:-2], cursor + "A", "W10", "", 7):
            with pytest.raises(InvalidArgument):
                store.runs(limit=2, cursor=bad, sort="run_id")  # type: ignore[arg-type]
        for sort, descending in (("tokens", True), ("labels", True), ("run_id", "yes")):
            with pytest.raises(InvalidArgument):
                store.runs(sort=sort, descending=descending)  # type: ignore[arg-type]

    def test_counter_sums_count_each_run_once_per_hour(self, store: Store) -> None:
        """counter_sums adds up each selected run's head counters per hour, filtered as runs() is."""
        ids = _fill(store)
        hidden = Checkpoint(run_id="index-run", labels={"safepoint.role": "index"})
        hidden.counters = {"tokens_in": 1000}
        store.save(hidden)
        found = store.counter_sums(hidden=[{"safepoint.role": "index"}])
        assert sum(runs for _, runs, _ in found.hours) == len(ids)
        assert found.unreadable == 0
        assert sum(c.get("tokens_in", 0) for _, _, c in found.hours) == sum(range(len(ids)))
        assert sum(c["spend"] for _, _, c in found.hours) == pytest.approx(0.5 * len(ids))
        for hour, _, _ in found.hours:
            assert hour.minute == hour.second == hour.microsecond == 0
        everything = store.counter_sums()
        assert sum(runs for _, runs, _ in everything.hours) == len(ids) + 1
        some = store.counter_sums(status="done", labels={"team": "b"})
        wanted = _pages(store, status="done", labels={"team": "b"})
        assert sum(runs for _, runs, _ in some.hours) == len(wanted)
        latest = store.run("index-run").updated_at
        assert sum(r for _, r, _ in store.counter_sums(updated_since=latest).hours) == 1
        before = store.counter_sums(updated_until=latest - timedelta(microseconds=1))
        assert sum(r for _, r, _ in before.hours) == len(ids)
        bad: list[Any]
        for bad in ([{}], [None], [{"team": 1}]):
            with pytest.raises(InvalidArgument):
                store.counter_sums(hidden=bad)  # type: ignore[arg-type]
