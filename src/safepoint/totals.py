"""What the runs cost: each run's head counters summed, in total and per bucket of its last update.

Shared by ``safepoint stats`` and the inspector's cost page, so the two
always agree. Each run counts once, with its head's counters (``tokens_in``,
``spend`` …: whatever the runs count) as the run row carries them — no
checkpoint is loaded, and no listing row: ``store.counter_sums`` returns the
sums per hour in one query. A run belongs to the bucket (hour, day, week or
month, UTC) of its last update. On an encrypted store the store opens each
run's sealed counters with its keyring. Nothing is written.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from safepoint.frameworks import BOOKKEEPING
from safepoint.store import Store

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
    counter stored as anything but an int or a float is not summed. The store
    sums per hour (``store.counter_sums``, one query); here hours become buckets.
    """
    bucket_of = BUCKETS[by]
    found = store.counter_sums(
        status=list(status or ()) or None,
        labels=labels or None,
        updated_since=since,
        # The store's bound is included; ours is not: the last microsecond before it.
        updated_until=None if until is None else until - timedelta(microseconds=1),
        hidden=None if show_all else BOOKKEEPING,
    )
    sums: dict[str, float] = defaultdict(float)
    buckets: dict[str, Bucket] = {}
    counted = 0
    for hour, runs, counters in found.hours:
        key = bucket_of(hour)
        entry = buckets.get(key)
        if entry is None:
            entry = buckets[key] = Bucket(key)
        entry.runs += runs
        counted += runs
        for counter, amount in counters.items():
            entry.counters[counter] += amount
            sums[counter] += amount
    names = [n for n in KNOWN if n in sums] + sorted(n for n in sums if n not in KNOWN)
    rows = [(key, buckets[key].runs, plain(buckets[key].counters)) for key in sorted(buckets)]
    return Totals(by, counted, found.unreadable, plain(sums), rows, names)


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
