"""``safepoint stats``: what the runs cost, in total and by when they were last updated.

Each run counts once, with its head's counters (``tokens_in``, ``spend`` …:
whatever the runs count), as the listing carries them — no checkpoint is
loaded. A run belongs to the bucket (day, hour, week or month, UTC) of its
last update. On an encrypted store the counters are sealed with each run's
key: the listing opens them (the keyring is needed, as for ``runs``).

It opens the store read-only and writes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from safepoint.cli.gc import parse_duration
from safepoint.cli.output import (
    cell,
    console,
    emit,
    handle_errors,
    number,
    open_store_at,
    say,
    store_options,
)
from safepoint.errors import InvalidArgument
from safepoint.frameworks import is_bookkeeping
from safepoint.visible import visible

_PAGE = 1000
# Shown first, in this order, when the runs count them; any other counter after them, by name.
_KNOWN = ("steps", "tokens_in", "tokens_out", "spend", "actions")
_BUCKETS: dict[str, Callable[[datetime], str]] = {
    "hour": lambda t: t.strftime("%Y-%m-%d %H:00"),
    "day": lambda t: t.strftime("%Y-%m-%d"),
    "week": lambda t: "{}-W{:02d}".format(*t.isocalendar()[:2]),
    "month": lambda t: t.strftime("%Y-%m"),
}


@click.command()
@store_options
@click.option("--status", multiple=True, help="Only runs with this status (repeatable).")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Only runs with this label.")
@click.option(
    "--since",
    default=None,
    metavar="WHEN",
    help="Runs updated at or after: 2026-12-01, an ISO time, or 7d ago.",
)
@click.option("--until", default=None, metavar="WHEN", help="Runs updated before: as --since.")
@click.option("--by", type=click.Choice(sorted(_BUCKETS)), default="day", show_default=True, help="Bucket.")
@click.option("--all", "show_all", is_flag=True, help="Adapters' bookkeeping runs too.")
@handle_errors
def stats(
    *,
    store_url: str,
    as_json: bool,
    status: tuple[str, ...],
    labels: tuple[str, ...],
    since: str | None,
    until: str | None,
    by: str,
    show_all: bool,
) -> None:
    """Totals of the runs' counters (tokens, spend, steps …), per day (or --by) of their last update.

    One value per run: its head's counters. Filter by --status, --label and
    the time of the last update (--since, --until).
    """
    wanted: dict[str, str] = {}
    for label in labels:
        key, sep, value = label.partition("=")
        if not sep:
            raise click.BadParameter("takes KEY=VALUE", param_hint="--label")
        wanted[key] = value
    now = datetime.now(UTC)
    start, end = _moment(since, "since", now), _moment(until, "until", now)
    bucket_of = _BUCKETS[by]
    totals: dict[str, float] = defaultdict(float)
    buckets: dict[str, _Bucket] = {}
    counted = unreadable = 0
    with open_store_at(store_url, read_only=True) as store:
        cursor: str | None = None
        while True:
            page = store.runs(
                status=list(status) or None,
                labels=wanted or None,
                updated_since=start,
                limit=_PAGE,
                cursor=cursor,
            )
            for run in page:
                if run.unreadable is not None:
                    unreadable += 1
                    continue
                if (not show_all and is_bookkeeping(run.labels)) or (
                    end is not None and run.updated_at >= end
                ):
                    continue
                counted += 1
                key = bucket_of(run.updated_at.astimezone(UTC))
                entry = buckets.setdefault(key, _Bucket())
                entry.runs += 1
                for counter, amount in run.counters.items():
                    if type(amount) in (int, float):  # a counter stored as text is not summed
                        entry.counters[counter] += amount
                        totals[counter] += amount
            cursor = page.next_cursor
            if cursor is None:
                break
    names = [n for n in _KNOWN if n in totals] + sorted(n for n in totals if n not in _KNOWN)
    rows: list[dict[str, Any]] = [
        {"bucket": key, "runs": buckets[key].runs, "counters": _plain(buckets[key].counters)}
        for key in sorted(buckets)
    ]
    summed = _plain(totals)
    data = {
        "by": by,
        "since": None if start is None else start.isoformat(),
        "until": None if end is None else end.isoformat(),
        "runs": counted,
        "unreadable": unreadable,
        "totals": summed,
        "buckets": rows,
    }

    def render() -> None:
        table = Table(title=Text(f"runs by {by} of their last update (UTC), each run's latest counters"))
        table.add_column(by)
        table.add_column("runs", justify="right")
        for name in names:
            table.add_column(cell(name, max_len=30), justify="right")
        for row in rows:
            values = [number(row["counters"][n]) if n in row["counters"] else "-" for n in names]
            table.add_row(row["bucket"], number(row["runs"]), *values)
        table.add_section()
        table.add_row("total", number(counted), *(number(summed[n]) for n in names))
        console.print(table)
        if unreadable:
            say(
                f"{number(unreadable)} runs whose row cannot be read are left out (safepoint runs lists them)"
            )

    emit(data, as_json, render)


@dataclass(slots=True)
class _Bucket:
    runs: int = 0
    counters: dict[str, float] = field(default_factory=lambda: defaultdict(float))


def _plain(sums: dict[str, float]) -> dict[str, int | float]:
    """Sums as JSON numbers: whole ones as ints, the others without float noise (0.1 + 0.2)."""
    return {name: int(v) if float(v).is_integer() else round(v, 9) for name, v in sums.items()}


def _moment(text: str | None, name: str, now: datetime) -> datetime | None:
    """``--since``/``--until``: an ISO date or time (UTC unless it says otherwise), or a duration ago."""
    if text is None:
        return None
    try:
        ago = parse_duration(text, name)
    except InvalidArgument:
        ago = None
    if ago is not None:
        return now - ago
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgument(
            f"--{name} {visible(text, max_len=40)!r} is not a date (2026-12-01), an ISO time"
            " or a duration (7d)"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
