"""``safepoint runs``: the store's runs, newest first, a page at a time, with what each waiting run asks."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import click
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from safepoint.cli.output import (
    ID_LEN,
    NARROW,
    WIDE,
    cell,
    console,
    emit,
    handle_errors,
    numbers,
    open_store_at,
    pairs,
    say,
    store_options,
    when,
)
from safepoint.cli.stores import given_store_options
from safepoint.errors import NotFound, SafepointError
from safepoint.frameworks import user_runs
from safepoint.model import Status
from safepoint.readable import question
from safepoint.records import Page, RunInfo
from safepoint.store import QueueState, Store
from safepoint.store.admin import IMPLICIT_TENANT, queue_states
from safepoint.visible import visible

_RUNS_PAGE = 50
_FIELDS = (
    "status",
    "head_step",
    "schema_version",
    "labels",
    "counters",
    "created_at",
    "updated_at",
    "parent",
)


# Every column ``runs`` can show, by the name --columns takes, with its heading, in their order;
# the default leaves out those --wide adds (holder and retry at show when a run on the page has one).
_COLUMNS = {
    "run": "run", "status": "status", "step": "step", "updated": "updated", "holder": "holder",
    "retry_at": "retry at", "attempts": "attempts", "labels": "labels", "counters": "counters",
    "note": "waiting for / last error", "created": "created", "parent": "parent",
}  # fmt: skip
# The least width of a long column when the terminal is too narrow for the table (shorter cells
# keep their width): a counter such as tokens_in=12,345 stays whole, an id folds.
# The columns a narrow terminal leaves out first, last one first.
_DROP_ORDER = ("run", "status", "step", "counters", "holder", "retry_at", "note", "updated", "labels")
_LEAST = {"run": 12, "holder": 14, "labels": 16, "counters": 18, "note": 14, "parent": 12}
# ``store.runs``' sorts (the store refuses any other; the CLI stays on the public API).
SORTS = ("created", "updated", "run_id", "status", "step")
_DEFAULT = frozenset({"run", "status", "step", "updated", "labels", "counters", "note"})


@click.command()
@store_options
@click.option("--status", multiple=True, help="Only runs with this status (repeatable).")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Only runs with this label.")
@click.option("--limit", default=_RUNS_PAGE, show_default=True, help="Runs per page.")
@click.option("--cursor", default=None, help="Continue from a previous page's next_cursor.")
@click.option(
    "--sort",
    type=click.Choice(SORTS),
    default="created",
    show_default=True,
    help="Order every run listed by this (largest or last first; ties newest first).",
)
@click.option("--ascending", is_flag=True, help="Smallest or first first (A to Z, oldest first).")
@click.option(
    "--all", "show_all", is_flag=True, help="Adapters' bookkeeping runs too (LangGraph's index runs)."
)
@click.option(
    "--wide", is_flag=True, help="Every column, nothing cut or wrapped (lines as long as they need)."
)
@click.option(
    "--columns",
    default=None,
    metavar="A,B,…",
    help=f"Only these columns, in this order: {', '.join(_COLUMNS)}.",
)
@handle_errors
def runs(
    *,
    store_url: str,
    as_json: bool,
    status: tuple[str, ...],
    labels: tuple[str, ...],
    limit: int,
    cursor: str | None,
    sort: str,
    ascending: bool,
    show_all: bool,
    wide: bool,
    columns: str | None,
) -> None:
    """List runs, newest first or --sort'ed (an adapter's bookkeeping runs only with --all).

    A run that waits in the workers' queue shows as queued; one a worker or
    an exclusive Run holds shows its holder and lease expiry; one a failed
    attempt holds back shows when it may be claimed again (retry at).
    """
    wanted: dict[str, str] = {}
    for label in labels:
        key, sep, value = label.partition("=")
        if not sep:
            raise click.BadParameter(f"{label!r} is not KEY=VALUE", param_hint="--label")
        wanted[key] = value
    chosen = _chosen_columns(columns)
    with open_store_at(store_url, read_only=True) as store:
        filters: dict[str, Any] = {"status": list(status) or None, "labels": wanted or None}
        if sort != "created" or ascending:  # the store sorts every run, pages follow its order
            filters.update(sort=sort, descending=not ascending)
        if show_all:
            page = store.runs(limit=limit, cursor=cursor, **filters)
        else:
            page = user_runs(store, limit=limit, cursor=cursor, **filters)
        where = store.url  # the URL as the store shows it: a PostgreSQL password masked
        whose = "" if store.tenant == IMPLICIT_TENANT else f"of tenant {store.tenant} "  # a checked name
        questions = _waiting_questions(store, page)
        queue = queue_states(store, page)
    now = datetime.now(UTC)
    rows = [_Row(run, queue.get(run.run_id), questions.get(run.run_id), now) for run in page]
    data = {
        "runs": [{**_run_dict(row.run), **row.queue_json(), "question": row.question} for row in rows],
        "next_cursor": page.next_cursor,
    }

    def render() -> None:
        names = chosen or [
            name
            for name in _COLUMNS
            if wide
            or name in _DEFAULT
            or (name == "holder" and any(row.holder for row in rows))
            or (name == "retry_at" and any(row.run.retry_at for row in rows))
        ]
        left_out: list[str] = []
        widths: list[int | None] | None = None
        while True:
            cells = [[row.cell(name, wide) for name in names] for row in rows]
            widths = [None] * len(names) if wide or chosen else _fitted(names, cells, console.width)
            if widths is not None or len(names) <= 4:
                break
            # Too narrow for them all: the least wanted column goes, and the last line says so.
            drop = max(names, key=_DROP_ORDER.index)
            left_out.insert(0, drop)
            names = [name for name in names if name != drop]
        if widths is None:
            widths = [None] * len(names)
        table = Table(title=Text(f"runs {whose}in {visible(where)}"))
        for name, width in zip(names, widths, strict=True):
            # Nothing is cut with "…": a cell folds where it must, labels and counters between pairs.
            table.add_column(_COLUMNS[name], overflow="fold", no_wrap=wide, width=width)
        for row_cells in cells:
            table.add_row(*row_cells)
        out = console
        if wide:  # the table at its natural width, whatever the terminal's
            out = Console(markup=False, highlight=False, emoji=False, width=100_000, soft_wrap=True)
        out.print(table, crop=not wide)
        if left_out:
            say(f"left out at this width: {', '.join(left_out)} (--wide or --columns shows them)")
        if page.next_cursor:
            again = _again(
                status=status,
                labels=labels,
                limit=limit,
                show_all=show_all,
                wide=wide,
                columns=columns,
                where=where,
                order=[f"--sort={sort}"] * (sort != "created") + ["--ascending"] * ascending,
            )
            # One line however narrow the terminal, so that it pastes whole.
            hint = "more: " + visible(shlex.join([*again, "--cursor", page.next_cursor]))
            console.print(Text(hint), soft_wrap=True)

    emit(data, as_json, render)


def _fitted(names: list[str], cells: list[list[Text]], width: int) -> list[int | None] | None:
    """Column widths that fit ``width``: when the columns fit as they are, rich lays them out (all
    None); else the short ones whole, the long ones their least, and what is left shared by the
    long ones in proportion to what they lack. None when even that does not fit."""
    natural = [
        max([cell_len(line) for row in cells for line in row[i].plain.splitlines()] + [_word(_COLUMNS[name])])
        for i, name in enumerate(names)
    ]
    room = width - (3 * len(names) + 1)  # the borders and padding of a rich table
    if sum(natural) <= room:
        return [None] * len(names)
    floor = [min(n, _LEAST[name]) if name in _LEAST else n for name, n in zip(names, natural, strict=True)]
    left = room - sum(floor)
    if left < 0:
        return None
    lacking = [n - f for n, f in zip(natural, floor, strict=True)]
    total = sum(lacking) or 1
    return [f + left * lack // total for f, lack in zip(floor, lacking, strict=True)]


def _word(heading: str) -> int:
    """The longest word of a heading: the narrowest its column can be without folding a word."""
    return max(len(word) for word in heading.split())


def _chosen_columns(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names or any(name not in _COLUMNS for name in names):
        raise click.BadParameter(f"takes column names among: {', '.join(_COLUMNS)}", param_hint="--columns")
    return names


def _again(
    *,
    status: tuple[str, ...],
    labels: tuple[str, ...],
    limit: int,
    show_all: bool,
    wide: bool,
    columns: str | None,
    where: str,
    order: list[str],
) -> list[str]:
    """The command for the next page: the same store (when given), filters, order and layout."""
    again = ["safepoint", "runs", *(f"--status={s}" for s in status), *(f"--label={x}" for x in labels)]
    again += order
    if limit != _RUNS_PAGE:
        again.append(f"--limit={limit}")
    again += ["--all"] * show_all + ["--wide"] * wide + ([f"--columns={columns}"] if columns else [])
    return again + given_store_options(where)


class _Row:
    """One listed run and what the page knows of it, as cells and as JSON."""

    def __init__(self, run: RunInfo, queue: QueueState | None, question: str | None, now: datetime) -> None:
        self.run, self.queue, self.question = run, queue, question
        self.holder = None if queue is None else queue.holder(now)
        # The run row says running for a run no one works on yet: it waits in the queue.
        self.queued = queue is not None and queue.waiting(now)

    def queue_json(self) -> dict[str, Any]:
        run, queue = self.run, self.queue
        return {
            "queued": self.queued,
            "holder": self.holder,
            "lease_expires_at": None if self.holder is None or queue is None else _iso(queue.expires_at),
            "attempts": run.attempts,
            "retry_at": _iso(run.retry_at),
            "last_error": run.last_error,
        }

    def cell(self, name: str, wide: bool) -> Text:
        run = self.run
        if run.unreadable is not None:  # listed, not loaded: the rest of the page stands
            unreadable = {"run": cell(run.run_id), "status": cell("unreadable")}
            note = cell(f"its run row cannot be read ({run.unreadable})")
            return unreadable.get(name, note if name == "note" else Text("-"))
        if name == "run":
            return cell(run.run_id)  # never cut: a long id wraps in its cell, escaped
        if name == "status":
            shown = "queued" if self.queued and run.status is Status.RUNNING else run.status.value
            return cell(shown)
        if name == "holder":
            if self.holder is None or self.queue is None:
                return Text("-")
            until = when(self.queue.expires_at).replace(" ", " " if wide else "\n")
            return Text(f"{visible(self.holder, max_len=ID_LEN)}{' ' if wide else chr(10)}until {until}")
        values: dict[str, Any] = {
            "step": str(run.head_step),
            # Date and time on two lines unless --wide: the narrowest the column can be.
            "updated": when(run.updated_at).replace(" ", " " if wide else "\n"),
            "created": when(run.created_at),
            "retry_at": when(run.retry_at).replace(" ", " " if wide else "\n"),
            "attempts": str(run.attempts),
            # One pair a line, so that a narrow cell breaks between pairs; --wide: one line per run.
            "labels": pairs(run.labels, max_len=WIDE) if wide else _one_a_line(pairs, run.labels),
            "counters": numbers(run.counters, max_len=WIDE) if wide else _one_a_line(numbers, run.counters),
            "parent": "-"
            if run.parent is None
            else f"{visible(run.parent.run_id, max_len=ID_LEN)} step {run.parent.step}",
            "note": visible(self.question or run.last_error or "-", max_len=NARROW),
        }
        return Text(values[name])


def _one_a_line(show: Callable[[Mapping[str, Any]], str], mapping: Mapping[str, Any]) -> str:
    """``key=value`` pairs one a line (each made visible: no line break of its own), cut at ``WIDE``."""
    return "\n".join(show({key: value}) for key, value in mapping.items())[:WIDE] or "-"


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _waiting_questions(store: Store, page: Page[RunInfo]) -> dict[str, str]:
    """What each waiting run of the page asks (its head's pending question), by run id.

    One load per waiting run, messages' blobs left in the store; a head that
    cannot be read says so instead of failing the listing.
    """
    asked: dict[str, str] = {}
    for run in page:
        if run.status is not Status.WAITING or run.unreadable is not None:
            continue
        try:
            head = store.load(run.run_id, migrate=False, fetch_blobs=False)
        except NotFound:
            continue  # deleted since it was listed
        except SafepointError as exc:
            asked[run.run_id] = f"(its checkpoint cannot be read: {type(exc).__name__})"
            continue
        text = question(head.pending_action)
        if text is not None:
            asked[run.run_id] = text
    return asked


def _run_dict(run: RunInfo) -> dict[str, Any]:
    if run.unreadable is not None:  # only the id is known; the error class says why
        return {"run_id": run.run_id, "unreadable": run.unreadable} | dict.fromkeys(_FIELDS)
    return {
        "unreadable": None,
        "run_id": run.run_id,
        "status": run.status.value,
        "head_step": run.head_step,
        "schema_version": run.schema_version,
        "labels": run.labels,
        "counters": run.counters,
        "created_at": run.created_at.isoformat(),
        "updated_at": run.updated_at.isoformat(),
        "parent": None if run.parent is None else {"run_id": run.parent.run_id, "step": run.parent.step},
    }
