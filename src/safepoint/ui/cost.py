"""The cost page (``/cost``): what the runs cost, in total and per day (or hour, week, month) of
their last update, for the whole store or the runs one label or status selects.

The sums are ``safepoint.totals``'s, the same as ``safepoint stats``: each run
counts once, with its head's counters as the listing carries them, so no
checkpoint is loaded; on an encrypted store the listing opens each run's
sealed counters with the store's keyring. Numbers leave here as text people
read (``safepoint.readable.number``); the charts are ``chart.bars``.
"""

from __future__ import annotations

from typing import Any

from safepoint.errors import InvalidArgument
from safepoint.model import Status
from safepoint.readable import number
from safepoint.store import Store
from safepoint.totals import BUCKETS, totals

from . import chart

CHARTS = 6  # bar charts at most: runs, then the first counters in ``totals``'s order


def cost_page(store: Store, *, by: str | None, status: str | None, label: str | None) -> dict[str, Any]:
    by = by or "day"
    if by not in BUCKETS:
        raise InvalidArgument("the bucket must be hour, day, week or month")
    labels = None
    if label:
        name, _, value = label.partition("=")
        labels = {name: value}
    found = totals(store, by=by, status=[status] if status else None, labels=labels)
    keys = [key for key, _, _ in found.buckets]
    charts = [chart.bars("runs", keys, [float(runs) for _, runs, _ in found.buckets])]
    for name in found.names[: CHARTS - 1]:
        charts.append(chart.bars(name, keys, [float(c.get(name, 0)) for _, _, c in found.buckets]))
    return {
        "by": by,
        "bys": list(BUCKETS),
        "status": status or "",
        "statuses": [s.value for s in Status],
        "label": label or "",
        "runs": number(found.runs),
        "unreadable": found.unreadable,
        "names": found.names,
        "totals": [(name, number(found.totals[name])) for name in found.names],
        "buckets": [
            (key, number(runs), [number(c[n]) if n in c else "-" for n in found.names])
            for key, runs, c in reversed(found.buckets)  # the newest first, as the runs list
        ],
        "charts": charts,
        "chart": {"width": chart.WIDTH, "height": chart.HEIGHT},
    }
