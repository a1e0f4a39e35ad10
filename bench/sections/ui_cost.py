"""The inspector over many runs (issue 36): the cost view and the runs page's searches over
10,000 runs, SQLite and PostgreSQL, plain and encrypted.

    .venv/bin/python bench/run.py --section ui     (after the run-page figures)
    .venv/bin/python bench/ui_cost.py [--runs 10000] [--postgres DSN]

Each store holds ``RUNS`` runs of one checkpoint each, with counters and a
team label (7 teams), last updated across 30 days (the store's clock set
per save, as the tests set it). Each page is asked for through Starlette's
test client, in process (the ASGI app, the guard, the store's queries, the
templates; no socket), once untimed and then ``REPS`` times; the figures
are the median wall time and the fastest (on a machine shared with other
work, the fastest is the one least moved by its load; the load average is
recorded beside them). The cost view sums every run's head counters
(``store.counter_sums``: one query, per hour); the searches are the store's
filters and sorts (``store.runs``), 50 runs a page. Target: under 300 ms.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from scratch_stores import Made, scratch_stores  # noqa: E402

from safepoint import Checkpoint, open_store, records  # noqa: E402
from sections.ui import KEYS  # noqa: E402

RUNS, REPS = 10_000, 5
TARGET_MS = 300.0
DAY_MICROS = 86_400 * 1_000_000
START = datetime(2026, 11, 1, tzinfo=UTC)  # the first run's last update; the last is 30 days on
WINDOW = (START + timedelta(days=10)).isoformat(), (START + timedelta(days=13)).isoformat()
# (what the row says, the path asked for); "label contains" only on a plain store.
COST = [
    ("cost view, by day", "/cost"),
    ("cost view, by month", "/cost?by=month"),
    ("cost view, one label", "/cost?label=team%3Dt3"),
    ("cost view, one status", "/cost?status=running"),
]
SEARCH = [
    ("runs page, newest first", "/"),
    ("id prefix", "/?prefix=run-0099"),
    ("label (exact)", "/?label=team%3Dt3"),
    ("status", "/?status=running"),
    ("3-day time range", f"/?since={WINDOW[0][:19]}&until={WINDOW[1][:19]}"),
    ("sorted by last update", "/?sort=updated&order=desc"),
    ("sorted by run id, A to Z", "/?sort=id&order=asc"),
    ("status + time range, sorted by step", f"/?status=running&since={WINDOW[0][:19]}&sort=step"),
    ("label contains (plain stores)", "/?label_has=t3"),
]


@dataclass(frozen=True)
class CostResult:
    store: str  # "SQLite", "PostgreSQL", each "+ encrypted" or not
    fill_s: float
    pages: dict[str, tuple[float, float] | None]  # row -> (median, fastest) ms; None: not on this store
    load: tuple[float, float]  # the 1-minute load average before and after its pages were asked for
    reps: int = REPS  # timed requests per page


def fill(url: str, runs: int, **options: Any) -> None:
    start = records.to_micros(START)
    real = records.now_micros
    try:
        with open_store(url, **options) as store:
            for n in range(runs):
                moment = start + (n * 30 * DAY_MICROS) // runs
                records.now_micros = lambda moment=moment: moment  # type: ignore[assignment]
                cp = Checkpoint(run_id=f"run-{n:06d}", labels={"team": f"t{n % 7}"})
                spend = 0.0125 * (n % 13)
                cp.counters = {"tokens_in": 1000 + n, "tokens_out": 960.0, "spend": spend, "steps": 4}
                store.save(cp)
    finally:
        records.now_micros = real  # type: ignore[assignment]


def timed(store: Any, encrypted: bool, reps: int = REPS) -> dict[str, tuple[float, float] | None]:
    from starlette.testclient import TestClient  # noqa: PLC0415

    from safepoint.ui import create_app  # noqa: PLC0415

    client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
    out: dict[str, tuple[float, float] | None] = {}
    for row, path in COST + SEARCH:
        if encrypted and "label_has" in path:
            out[row] = None  # refused on an encrypted store: labels match only whole
            continue
        assert client.get(path).status_code == 200, path
        times = []
        for _ in range(reps):
            began = time.perf_counter()
            answer = client.get(path)
            times.append((time.perf_counter() - began) * 1000)
            assert answer.status_code == 200, path
        out[row] = statistics.median(times), min(times)
    return out


def stores(pg_url: str | None) -> AbstractContextManager[Made]:
    """(name, url, options) of each store measured; PostgreSQL in scratch schemas, dropped after."""
    return scratch_stores("ui_cost", pg_url, KEYS)


def run(pg_url: str | None, runs: int = RUNS, reps: int = REPS, log: Any = None) -> list[CostResult]:
    results = []
    with stores(pg_url) as made:
        for name, url, options in made:
            began = time.perf_counter()
            fill(url, runs, **options)
            filled = time.perf_counter() - began
            before = os.getloadavg()[0]
            with open_store(url, read_only=True, **options) as store:
                pages = timed(store, bool(options), reps)
            results.append(CostResult(name, filled, pages, (before, os.getloadavg()[0]), reps))
            if log is not None:
                shown = (f"{ms[0]:.0f}/{ms[1]:.0f}" for ms in pages.values() if ms is not None)
                log(f"ui cost: {name} (median/fastest ms) " + ", ".join(shown))
    return results
