"""``safepoint stats``: what the runs cost, in total and by when they were last updated.

Each run counts once, with its head's counters (``tokens_in``, ``spend`` …:
whatever the runs count), as the listing carries them — no checkpoint is
loaded. A run belongs to the bucket (day, hour, week or month, UTC) of its
last update. On an encrypted store the counters are sealed with each run's
key: the listing opens them (the keyring is needed, as for ``runs``). The
summing is ``safepoint.totals``'s, shared with the inspector's cost page.

It opens the store read-only and writes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime

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
from safepoint.totals import BUCKETS, totals, totals_json
from safepoint.visible import visible


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
@click.option("--by", type=click.Choice(sorted(BUCKETS)), default="day", show_default=True, help="Bucket.")
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
    with open_store_at(store_url, read_only=True) as store:
        found = totals(store, by=by, status=status, labels=wanted, since=start, until=end, show_all=show_all)
    data = totals_json(found, start, end)
    names, summed, counted, unreadable = found.names, found.totals, found.runs, found.unreadable
    rows = data["buckets"]

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
