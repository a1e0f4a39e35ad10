"""What the runs cost: each run's head counters summed, in total and per bucket of its last update.

Shared by ``safepoint stats`` and the inspector's cost page, so the two
always agree. Each run counts once, with its head's counters (``tokens_in``,
``spend`` …: whatever the runs count) as the listing carries them — no
checkpoint is loaded. A run belongs to the bucket (hour, day, week or month,
UTC) of its last update. On an encrypted store the listing opens each run's
sealed counters with the store's keyring. Nothing is written.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from safepoint.frameworks import is_bookkeeping
from safepoint.store import Store

PAGE = 1000  # runs per listing call
# Shown first, in this order, when the runs count them; any other counter after them, by name.
KNOWN = ("steps", "tokens_in", "tokens_out", "spend", "actions")
BUCKETS: dict[str, Callable[[datetime], str]] = {
    "hour": lambda t: t.strftime("%Y-%m-%d %H:00"),
    "day": lambda t: t.strftime("%Y-%m-%d"),
    "week": lambda t: "{}-W{:02d}".format(*t.isocalendar()[:2]),
    "month": lambda t: t.strftime("%Y-%m"),
}


@dataclass(slots=True)
class Bucket:
    key: str
    runs: int = 0
    counters: dict[str, float] = field(default_factory=lambda: defaultdict(float))


@dataclass(slots=True)
class Totals:
    """The sums: ``names`` the counters in the order to show them, ``buckets`` oldest first."""

    by: str
    runs: int
    unreadable: int
    totals: dict[str, int | float]
    buckets: list[tuple[str, int, dict[str, int | float]]]  # (bucket, runs, counters)
    names: list[str]


def totals(
    store: Store,
    *,
    by: str = "day",
    status: Iterable[str] | None = None,
    labels: dict[str, str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    show_all: bool = False,
) -> Totals:
    """Sum the head counters of the runs the filters select (``until`` excluded), per ``by`` bucket.

    Bookkeeping runs (an adapter's index) are left out unless ``show_all``; a
    run whose row cannot be read is counted in ``unreadable``, not summed. A
    counter stored as anything but an int or a float is not summed.
    """
    bucket_of = BUCKETS[by]
    statuses = list(status or ()) or None
    sums: dict[str, float] = defaultdict(float)
    buckets: dict[str, Bucket] = {}
    counted = unreadable = 0
    keys: dict[tuple[int, int, int, int], str] = {}
    cursor: str | None = None
    while True:
        page = store.runs(
            status=statuses, labels=labels or None, updated_since=since, limit=PAGE, cursor=cursor
        )
        for run in page:
            if run.unreadable is not None:
                unreadable += 1
                continue
            if (not show_all and is_bookkeeping(run.labels)) or (
                until is not None and run.updated_at >= until
            ):
                continue
            counted += 1
            moment = run.updated_at
            if moment.tzinfo is not UTC:
                moment = moment.astimezone(UTC)
            # One strftime per hour seen, not per run: 10,000 runs fall in a few hundred hours.
            hour = (moment.year, moment.month, moment.day, moment.hour)
            key = keys.get(hour)
            if key is None:
                key = keys[hour] = bucket_of(moment)
            entry = buckets.get(key)
            if entry is None:
                entry = buckets[key] = Bucket(key)
            entry.runs += 1
            for counter, amount in run.counters.items():
                if type(amount) in (int, float):
                    entry.counters[counter] += amount
                    sums[counter] += amount
        cursor = page.next_cursor
        if cursor is None:
            break
    names = [n for n in KNOWN if n in sums] + sorted(n for n in sums if n not in KNOWN)
    rows = [(key, buckets[key].runs, plain(buckets[key].counters)) for key in sorted(buckets)]
    return Totals(by, counted, unreadable, plain(sums), rows, names)


def plain(sums: dict[str, float]) -> dict[str, int | float]:
    """Sums as JSON numbers: whole ones as ints, the others without float noise (0.1 + 0.2)."""
    return {name: int(v) if float(v).is_integer() else round(v, 9) for name, v in sums.items()}


def totals_json(found: Totals, since: datetime | None, until: datetime | None) -> dict[str, Any]:
    """The totals as ``safepoint stats --json`` prints them."""
    return {
        "by": found.by,
        "since": None if since is None else since.isoformat(),
        "until": None if until is None else until.isoformat(),
        "runs": found.runs,
        "unreadable": found.unreadable,
        "totals": found.totals,
        "buckets": [{"bucket": key, "runs": runs, "counters": c} for key, runs, c in found.buckets],
    }
