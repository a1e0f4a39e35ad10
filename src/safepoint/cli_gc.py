"""``safepoint gc``: apply retention, then delete blobs nothing references."""

from __future__ import annotations

import re
from datetime import timedelta

import click
from rich.progress import Progress
from rich.table import Table

from safepoint.cli import _open, handle_errors, main, store_options
from safepoint.cli_render import console, emit
from safepoint.errors import InvalidArgument
from safepoint.model import Retention
from safepoint.store.housekeeping import prune_store

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str | None, name: str) -> timedelta | None:
    """``90s``, ``15m``, ``12h``, ``7d``, ``2w`` (or a sum: ``1d12h``) as a timedelta."""
    if text is None:
        return None
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise InvalidArgument(f"--{name} {text!r} is not a duration like 90s, 15m, 12h, 7d or 2w")
    return timedelta(seconds=sum(float(n) * _UNITS[u] for n, u in parts))


@main.command()
@store_options
@click.option("--dry-run", is_flag=True, help="Report what would be removed; change nothing.")
@click.option("--keep-last", type=int, default=None, help="Keep each run's newest N checkpoints.")
@click.option("--keep-for", default=None, metavar="DURATION", help="Keep checkpoints younger than this (7d).")
@click.option(
    "--delete-finished-after", default=None, metavar="DURATION", help="Delete finished runs this old (30d)."
)
@click.option("--grace", default="0s", show_default=True, metavar="DURATION", help="Spare blobs this young.")
@handle_errors
def gc(
    *,
    store_url: str,
    as_json: bool,
    dry_run: bool,
    keep_last: int | None,
    keep_for: str | None,
    delete_finished_after: str | None,
    grace: str,
) -> None:
    """Prune checkpoints by retention, then delete blobs no checkpoint references.

    Without retention flags only runs with their own policy (set_retention)
    are pruned; blobs are always collected. Safe while agents are saving.
    """
    policy = None
    if keep_last is not None or keep_for is not None or delete_finished_after is not None:
        policy = Retention(
            keep_last=keep_last,
            keep_for=parse_duration(keep_for, "keep-for"),
            delete_finished_after=parse_duration(delete_finished_after, "delete-finished-after"),
        )
    wait = parse_duration(grace, "grace") or timedelta(0)
    with _open(store_url) as store, Progress(console=console, disable=as_json) as bar:
        task = bar.add_task("pruning runs", total=None)
        pruned = prune_store(
            store, policy, dry_run=dry_run, progress=lambda d, t: bar.update(task, completed=d, total=t)
        )
        bar.update(task, description="collecting blobs")
        collected = store.collect_garbage(grace=wait, dry_run=dry_run)
    data = {
        "dry_run": dry_run,
        "runs": pruned.runs,
        "checkpoints_pruned": pruned.checkpoints_pruned,
        "rows_deleted": pruned.rows_deleted,
        "runs_deleted": pruned.runs_deleted,
        "blobs_deleted": collected.blobs_deleted,
        "bytes_freed": collected.bytes_freed,
        "blobs_kept": collected.blobs_kept,
    }

    def render() -> None:
        table = Table(
            title="safepoint gc" + (" (dry run: nothing changed)" if dry_run else ""), show_header=False
        )
        for key in (
            "runs",
            "checkpoints_pruned",
            "rows_deleted",
            "blobs_deleted",
            "bytes_freed",
            "blobs_kept",
        ):
            table.add_row(key.replace("_", " "), f"{data[key]:,}")
        table.add_row("runs deleted", str(len(pruned.runs_deleted)))
        console.print(table)

    emit(data, as_json, render)
