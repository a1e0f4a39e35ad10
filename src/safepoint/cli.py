"""The ``safepoint`` command: a thin layer over the public API.

Every command takes ``--store URL`` (or the ``SAFEPOINT_STORE`` environment
variable; default ``sqlite:///.safepoint/state.db``) and ``--json``; output
goes through ``emit``: tables for people, JSON for machines. Errors print one
line to stderr and exit with status 1.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from safepoint.errors import SafepointError
from safepoint.model import Checkpoint, RunInfo
from safepoint.store import DEFAULT_URL, Store, open_store

F = TypeVar("F", bound=Callable[..., Any])
_console = Console()


def store_options(func: F) -> F:
    """``--store`` and ``--json``, shared by every command that reads a store."""
    func = click.option(
        "--store",
        "store_url",
        envvar="SAFEPOINT_STORE",
        default=DEFAULT_URL,
        show_default=True,
        help="Store URL (env SAFEPOINT_STORE).",
    )(func)
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")(func)


def handle_errors(func: F) -> F:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SafepointError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def emit(data: Any, as_json: bool, render: Callable[[], None]) -> None:
    """The one output path: JSON when asked, otherwise the human rendering."""
    if as_json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        render()


def _open(store_url: str) -> Store:
    return open_store(store_url)


@click.group()
@click.version_option(package_name="safepoint")
def main() -> None:
    """safepoint: checkpoints that make AI-agent runs survivable."""


@main.command()
@store_options
@click.option("--status", multiple=True, help="Only runs with this status (repeatable).")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Only runs with this label.")
@click.option("--limit", default=50, show_default=True, help="Runs per page.")
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
    with _open(store_url) as store:
        page = store.runs(status=list(status) or None, labels=wanted or None, limit=limit, cursor=cursor)
    data = {"runs": [_run_dict(r) for r in page], "next_cursor": page.next_cursor}

    def render() -> None:
        table = Table(title=f"runs in {store_url}")
        for column in ("run", "status", "step", "updated", "labels", "counters"):
            table.add_column(column)
        for run in page:
            table.add_row(
                run.run_id,
                run.status.value,
                str(run.head_step),
                _when(run.updated_at),
                _pairs(run.labels),
                _pairs(run.counters),
            )
        _console.print(table)
        if page.next_cursor:
            _console.print(f"more: safepoint runs --cursor {page.next_cursor}")

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
    with _open(store_url) as store:
        cp = store.load(run_id, step)
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


def _render_checkpoint(cp: Checkpoint, steps: int, show_messages: int) -> None:
    summary = Table(title=f"run {cp.run_id} · step {cp.step}", show_header=False)
    summary.add_column("field", style="bold")
    summary.add_column("value")
    rows = [
        ("status", cp.status.value),
        ("schema_version", str(cp.schema_version)),
        ("saved", _when(cp.created_at)),
        ("checkpoints", str(steps)),
        ("messages", str(len(cp.messages))),
        ("counters", _pairs(cp.counters)),
        ("cursors", json.dumps(cp.cursors, ensure_ascii=False)),
        ("pending_action", "-" if cp.pending_action is None else json.dumps(cp.pending_action)),
        ("state", _clip(json.dumps(cp.state, ensure_ascii=False), 200)),
        ("labels", _pairs(cp.labels)),
        ("parent", "-" if cp.parent is None else f"{cp.parent.run_id} step {cp.parent.step}"),
        ("digest", cp.digest or "-"),
        ("scrubbed", _scrubbed(cp)),
    ]
    for field, value in rows:
        summary.add_row(field, value)
    _console.print(summary)
    recent = list(enumerate(cp.messages))[-show_messages:] if show_messages > 0 else []
    if recent:
        table = Table(title=f"last {len(recent)} of {len(cp.messages)} messages")
        table.add_column("#", justify="right")
        table.add_column("role")
        table.add_column("content")
        for index, message in recent:
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
            table.add_row(str(index), str(message.get("role", "?")), _clip(text, 100))
        _console.print(table)


def _scrubbed(cp: Checkpoint) -> str:
    """What the scrubber replaced when this checkpoint was saved: counts by rule, never values."""
    counts = cp.scrub_report.by_rule()
    return ", ".join(f"{rule} x{n}" for rule, n in counts.items()) or "nothing"


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


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


def _pairs(mapping: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in mapping.items()) or "-"


def _clip(text: str, width: int) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


# The schema-change commands live in their own module; importing it registers them.
from safepoint import cli_gc, cli_inspect, cli_migrations  # noqa: E402, F401

if __name__ == "__main__":
    # Under ``python -m`` this file is ``__main__``; the commands registered
    # themselves on ``safepoint.cli.main``, so run that one.
    from safepoint.cli import main as entry_point

    entry_point()
