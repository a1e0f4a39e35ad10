"""``safepoint runs``: the store's runs, newest first, a page at a time, with what each waiting run asks."""

from __future__ import annotations

import shlex
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from safepoint.cli.output import (
    NARROW,
    WIDE,
    cell,
    console,
    emit,
    handle_errors,
    open_store_at,
    pairs,
    say,
    store_options,
    when,
)
from safepoint.errors import NotFound, SafepointError
from safepoint.frameworks import user_runs
from safepoint.model import Status
from safepoint.readable import question
from safepoint.records import Page, RunInfo
from safepoint.store import Store
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


@click.command()
@store_options
@click.option("--status", multiple=True, help="Only runs with this status (repeatable).")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Only runs with this label.")
@click.option("--limit", default=_RUNS_PAGE, show_default=True, help="Runs per page.")
@click.option("--cursor", default=None, help="Continue from a previous page's next_cursor.")
@click.option(
    "--all", "show_all", is_flag=True, help="Adapters' bookkeeping runs too (LangGraph's index runs)."
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
    show_all: bool,
) -> None:
    """List runs, newest first (an adapter's bookkeeping runs only with --all)."""
    wanted: dict[str, str] = {}
    for label in labels:
        key, sep, value = label.partition("=")
        if not sep:
            raise click.BadParameter(f"{label!r} is not KEY=VALUE", param_hint="--label")
        wanted[key] = value
    with open_store_at(store_url, read_only=True) as store:
        filters: dict[str, Any] = {"status": list(status) or None, "labels": wanted or None}
        if show_all:
            page = store.runs(limit=limit, cursor=cursor, **filters)
        else:
            page = user_runs(store, limit=limit, cursor=cursor, **filters)
        where = store.url  # the URL as the store shows it: a PostgreSQL password masked
        questions = _waiting_questions(store, page)
    data = {
        "runs": [{**_run_dict(r), "question": questions.get(r.run_id)} for r in page],
        "next_cursor": page.next_cursor,
    }

    def render() -> None:
        table = Table(title=Text(f"runs in {visible(where)}"))
        # A run id is never cut: a long one wraps in its cell (escaped, like every stored text).
        table.add_column("run", overflow="fold")
        for column in ("status", "step", "updated", "labels", "counters", "waiting for / last error"):
            table.add_column(column)
        for run in page:
            if run.unreadable is not None:  # listed, not loaded: the rest of the page stands
                note = f"its run row cannot be read ({run.unreadable})"
                table.add_row(cell(run.run_id), cell("unreadable"), "-", "-", "-", "-", cell(note))
                continue
            note = questions.get(run.run_id) or run.last_error or "-"
            table.add_row(
                cell(run.run_id),
                cell(run.status.value),
                cell(run.head_step),
                when(run.updated_at),
                Text(pairs(run.labels, max_len=WIDE)),
                Text(pairs(run.counters, max_len=WIDE)),
                cell(note, max_len=NARROW),
            )
        console.print(table)
        if page.next_cursor:
            # The same filters, so the next page is the next page of this listing.
            again = [
                "safepoint",
                "runs",
                *(f"--status={s}" for s in status),
                *(f"--label={x}" for x in labels),
            ]
            if limit != _RUNS_PAGE:
                again.append(f"--limit={limit}")
            say("more: " + visible(shlex.join([*again, "--cursor", page.next_cursor])))

    emit(data, as_json, render)


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
