"""What the runs count, summed: each run's head counters, per UTC hour of its last update.

One query (``run_counters``) returns, for the runs the filters select, only
what a sum needs — the run's id (an encrypted store's counters are sealed
for it), its last update and its head's counters — never a listing row.
Sums are per hour because any coarser bucket (day, week, month, UTC) is
made of whole hours: ``safepoint.totals`` adds hours up, and 10,000 runs
leave it a few hundred hours, not 10,000 rows. A run whose counters cannot
be read (damaged, or sealed with a key this store lacks) is counted as
unreadable, as a listing marks it, and the sums stand.
"""

from __future__ import annotations

from collections import defaultdict

from safepoint import codec
from safepoint.errors import EncryptedStore
from safepoint.records import CounterSums, from_micros
from safepoint.store.query import Op, Query, Unopened
from safepoint.store.stored_row import EXACT
from safepoint.visible import visible

HOUR = 3_600_000_000  # microseconds


def counter_sums(
    *,
    statuses: list[str] | None,
    labels: dict[str, str] | None,
    hidden: list[dict[str, str]] | None,
    updated_since: int | None,
    updated_until: int | None,
) -> Op[CounterSums]:
    """The head counters of the runs the filters select (``hidden``: label sets whose runs are
    left out), summed per hour of their last update."""
    rows = yield Query(
        "run_counters",
        {
            "statuses": None if statuses is None else codec.encode(statuses).decode(),
            "labels": None if labels is None else codec.encode(labels).decode(),
            "hidden": codec.encode(hidden).decode() if hidden else None,
            "updated_since": updated_since,
            "updated_until": updated_until,
        },
    )
    runs: dict[int, int] = defaultdict(int)
    sums: dict[int, dict[str, float]] = {}
    unreadable = 0
    decode, numbers = codec.decode, (int, float)
    for run_id, _, updated_at, column in rows:
        if isinstance(column, bytes | memoryview):  # SQLite's sealed header: never opened here
            raise EncryptedStore(f"run {visible(str(run_id))}")
        try:
            if isinstance(column, Unopened) or type(updated_at) is not int:
                raise TypeError("not readable")
            counters = decode(column)
            if type(counters) is str:  # sealed counters (PostgreSQL) and no keyring to open them
                raise EncryptedStore(f"run {visible(str(run_id))}")
            if type(counters) is dict and len(counters) == 1 and type(counters.get(EXACT)) is str:
                counters = decode(counters[EXACT])  # numbers jsonb would not give back exactly
            if type(counters) is not dict:
                raise TypeError("not a dict")
        except (TypeError, ValueError):
            unreadable += 1
            continue
        hour = updated_at // HOUR
        runs[hour] += 1
        summed = sums.get(hour)
        if summed is None:
            summed = sums[hour] = defaultdict(float)
        for name, amount in counters.items():
            if type(amount) in numbers:
                summed[name] += amount
    hours = [(from_micros(hour * HOUR), runs[hour], dict(sums[hour])) for hour in sorted(runs)]
    return CounterSums(hours, unreadable)
