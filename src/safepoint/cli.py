"""The ``safepoint`` command: a thin layer over the public API.

Every command takes ``--store URL`` (or the ``SAFEPOINT_STORE`` environment
variable; default ``sqlite:///.safepoint/state.db``) and ``--json``; output
goes through ``emit``: tables for people, JSON for machines. Errors print one
line to stderr (a JSON object with ``--json``) and exit with the status for
their kind (``handle_errors``, ``cli_render.ExitCode``). Whatever comes from a store is shown
through ``safepoint.cli_render``: control characters visible, never markup.
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.table import Table
from rich.text import Text

from safepoint import cli_messages
from safepoint.cli_render import (
    ID_LEN,
    ExitCode,
    cell,
    console,
    emit,
    error_object,
    pairs,
    report_error,
    say,
    shown,
    when,
)
from safepoint.errors import InvalidArgument, NotFound, SafepointError
from safepoint.model import Checkpoint, Status
from safepoint.records import Page, RunInfo
from safepoint.store import DEFAULT_URL, SnapshotWarning, Store, open_store
from safepoint.store.urls import scheme_of, split_schema
from safepoint.visible import visible

F = TypeVar("F", bound=Callable[..., Any])


def store_options(func: F) -> F:
    """``--store``, ``--schema`` and ``--json``, shared by every command that opens a store.

    ``--schema`` reaches the store through ``_open`` (it is kept on the click
    context, not passed to the command), so every command that opens its
    store with ``_open`` honours it.
    """
    func = click.option(
        "--schema",
        default=None,
        metavar="NAME",
        expose_value=False,
        callback=_remember_schema,
        help="PostgreSQL schema of the store (beats ?schema= in the URL, then env SAFEPOINT_SCHEMA).",
    )(func)
    func = click.option(
        "--store",
        "store_url",
        envvar="SAFEPOINT_STORE",
        default=DEFAULT_URL,
        show_default=True,
        help="Store URL (env SAFEPOINT_STORE).",
    )(func)
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")(func)


_SCHEMA = "safepoint.schema"  # where --schema waits on the click context for _open


def _remember_schema(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    ctx.meta[_SCHEMA] = value
    return value


EXIT_NOT_FOUND = ExitCode.NOT_FOUND  # no store at the URL (StoreNotFound), or no such run or step


def handle_errors(func: F) -> F:
    """Every command's errors, in one place: a ``SafepointError`` prints one line on stderr
    (with ``--json``, a JSON object: ``cli_render.error_json``) and exits with the status
    for its kind: ``cli_render.ExitCode`` (usage 2, not found 3, corrupt 4, store
    unavailable 5, conflict or lease lost 6, anything else 1), documented in docs/cli.md."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SafepointError as exc:
            sys.exit(report_error(exc, as_json=bool(kwargs.get("as_json"))))

    return wrapper  # type: ignore[return-value]


class _Commands(click.Group):
    """The command group; a usage error quoting the command line shows it with control characters escaped.

    Click prints some arguments raw (``Got unexpected extra argument (…)``),
    and a run id pasted from a store can hold escape sequences. With
    ``--json`` on the command line, a usage error is a JSON object too.
    """

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:
            raise _visible_usage(exc, "--json" in args) from None
        ctx.meta[_WANTS_JSON] = "--json" in args
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:  # a subcommand's own arguments are parsed here
            raise _visible_usage(exc, ctx.meta.get(_WANTS_JSON, False)) from None


_WANTS_JSON = "safepoint.json"  # on the group's context: --json was on the command line


def _visible_usage(exc: click.ClickException, as_json: bool = False) -> click.ClickException:
    """``exc`` itself when its text is plain; else the same kind of error (and exit code) with it escaped.

    With ``as_json`` it is printed here as a JSON object and the command exits
    with its code (2 for a usage error).
    """
    message = exc.format_message()
    if as_json:
        click.echo(error_object(message, type(exc).__name__), err=True)
        sys.exit(exc.exit_code)
    if visible(message) == message:
        return exc
    if isinstance(exc, click.UsageError):
        return click.UsageError(visible(message), exc.ctx)
    return click.ClickException(visible(message))


def _open(store_url: str, *, read_only: bool = False, **options: Any) -> Store:
    """The store a command works on: read-only for the commands that only look (they never create one).

    The PostgreSQL schema is ``--schema``, else ``?schema=`` in the URL, else
    ``SAFEPOINT_SCHEMA``. A SQLite file read as an immutable snapshot (no
    write access to its folder) is said on stderr.
    """
    postgres = scheme_of(store_url) == "postgresql"
    chosen = click.get_current_context().meta.get(_SCHEMA)
    if chosen is not None and not postgres:
        raise InvalidArgument("--schema applies to PostgreSQL stores only")
    if chosen is None and postgres and split_schema(store_url)[1] is None:
        chosen = os.environ.get("SAFEPOINT_SCHEMA") or None
    if chosen is not None:
        options["schema"] = chosen
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SnapshotWarning)
        store = open_store(store_url, read_only=read_only, **options)
    for warning in caught:
        if issubclass(warning.category, SnapshotWarning):
            click.echo(f"note: {visible(str(warning.message))}", err=True)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return store


@click.group(cls=_Commands)
@click.version_option(package_name="safepoint")
def main() -> None:
    """safepoint: checkpoints that make AI-agent runs survivable."""


_RUNS_PAGE = 50


@main.command()
@store_options
@click.option("--status", multiple=True, help="Only runs with this status (repeatable).")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Only runs with this label.")
@click.option("--limit", default=_RUNS_PAGE, show_default=True, help="Runs per page.")
@click.option("--cursor", default=None, help="Continue from a previous page's next_cursor.")
@handle_errors
def runs(
    *,
    store_url: str,
    as_json: bool,
    status: tuple[str, ...],
    labels: tuple[str, ...],
    limit: int,
    cursor: str | None,
) -> None:
    """List runs, newest first."""
    wanted: dict[str, str] = {}
    for label in labels:
        key, sep, value = label.partition("=")
        if not sep:
            raise click.BadParameter(f"{label!r} is not KEY=VALUE", param_hint="--label")
        wanted[key] = value
    with _open(store_url, read_only=True) as store:
        page = store.runs(status=list(status) or None, labels=wanted or None, limit=limit, cursor=cursor)
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
            note = questions.get(run.run_id) or run.last_error or "-"
            table.add_row(
                cell(run.run_id),
                cell(run.status.value),
                cell(run.head_step),
                when(run.updated_at),
                Text(pairs(run.labels, max_len=_WIDE)),
                Text(pairs(run.counters, max_len=_WIDE)),
                cell(note, max_len=_NARROW),
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


@main.command()
@store_options
@click.argument("run_id")
@click.option("--step", type=int, default=None, help="Show this step instead of the latest.")
@click.option(
    "--messages", "show_messages", default=10, show_default=True, help="How many recent messages to show."
)
@handle_errors
def show(*, store_url: str, as_json: bool, run_id: str, step: int | None, show_messages: int) -> None:
    """Show one checkpoint of a run (the latest unless --step)."""
    with _open(store_url, read_only=True) as store:
        cp = store.load(run_id, step, migrate=False)  # as stored: a checkpoint of any version shows
        history = store.history(run_id)

    def render() -> None:
        _render_checkpoint(cp, len(history), show_messages)

    data = cp.to_dict()
    data["scrub_report"] = [
        {"rule": rule, "path": path, "count": count} for rule, path, count in cp.scrub_report.counts
    ]
    emit(data, as_json, render)


@main.command()
@click.option("--store", "store_url", envvar="SAFEPOINT_STORE", default=DEFAULT_URL, show_default=True)
def demo(*, store_url: str) -> None:
    """Run the scripted agent, SIGKILL it mid-run, resume it in a fresh process."""
    from safepoint.demo import main as run_demo  # noqa: PLC0415  # only this command needs it

    sys.exit(run_demo(store_url))


# How much of a stored value one table cell shows.
_WIDE = 200
_NARROW = 100


def _render_checkpoint(cp: Checkpoint, steps: int, show_messages: int) -> None:
    summary = Table(
        title=Text(f"run {visible(cp.run_id, max_len=ID_LEN)} · step {cp.step}"), show_header=False
    )
    summary.add_column("field", style="bold")
    summary.add_column("value")
    parent = cp.parent
    rows = [
        ("status", shown(cp.status.value)),
        ("schema_version", shown(cp.schema_version)),
        ("saved", when(cp.created_at)),
        ("checkpoints", str(steps)),
        ("messages", str(len(cp.messages))),
        ("counters", pairs(cp.counters, max_len=_WIDE)),
        ("cursors", shown(cp.cursors, max_len=_WIDE)),
        ("pending_action", visible(cli_messages.pending(cp.pending_action), max_len=_WIDE)),
        ("state", shown(cp.state, max_len=_WIDE)),
        ("labels", pairs(cp.labels, max_len=_WIDE)),
        ("parent", "-" if parent is None else f"{visible(parent.run_id, max_len=ID_LEN)} step {parent.step}"),
        ("digest", shown(cp.digest or "-")),
        ("scrubbed", _scrubbed(cp)),
    ]
    for field, value in rows:
        summary.add_row(field, Text(value))
    console.print(summary)
    recent = list(enumerate(cp.messages))[-show_messages:] if show_messages > 0 else []
    if recent:
        table = Table(title=Text(f"last {len(recent)} of {len(cp.messages)} messages"))
        table.add_column("#", justify="right")
        table.add_column("role")
        table.add_column("content")
        for index, message in recent:
            # One row per message, tool calls and results included: a line break shows as \n.
            role, text = cli_messages.describe(message)
            table.add_row(str(index), cell(role, max_len=_NARROW), cell(text, max_len=_NARROW))
        console.print(table)


def _scrubbed(cp: Checkpoint) -> str:
    """What the scrubber replaced when this checkpoint was saved: counts by rule, never values."""
    counts = cp.scrub_report.by_rule()
    return ", ".join(f"{shown(rule)} x{n}" for rule, n in counts.items()) or "nothing"


def _waiting_questions(store: Store, page: Page[RunInfo]) -> dict[str, str]:
    """What each waiting run of the page asks (its head's pending question), by run id.

    One load per waiting run, messages' blobs left in the store; a head that
    cannot be read says so instead of failing the listing.
    """
    asked: dict[str, str] = {}
    for run in page:
        if run.status is not Status.WAITING:
            continue
        try:
            head = store.load(run.run_id, migrate=False, fetch_blobs=False)
        except NotFound:
            continue  # deleted since it was listed
        except SafepointError as exc:
            asked[run.run_id] = f"(its checkpoint cannot be read: {type(exc).__name__})"
            continue
        text = cli_messages.question(head.pending_action)
        if text is not None:
            asked[run.run_id] = text
    return asked


def _run_dict(run: RunInfo) -> dict[str, Any]:
    return {
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


# The other commands live in their own modules; importing them registers them.
from safepoint import cli_gc, cli_inspect, cli_migrations, cli_operate  # noqa: E402, F401

if __name__ == "__main__":
    # Under ``python -m`` this file is ``__main__``; the commands registered
    # themselves on ``safepoint.cli.main``, so run that one.
    from safepoint.cli import main as entry_point

    entry_point()
