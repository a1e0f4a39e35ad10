"""``safepoint gc``: apply retention, delete blobs nothing references, give the file its space back."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import click
from rich.progress import Progress

from safepoint.cli.output import (
    console,
    emit,
    handle_errors,
    open_existing,
    open_store_at,
    say,
    store_options,
)
from safepoint.errors import InvalidArgument
from safepoint.records import Retention
from safepoint.store.admin import FileSpace, prune_store

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


@click.command()
@store_options
@click.option("--dry-run", is_flag=True, help="Report what would be removed; change nothing.")
@click.option("--keep-last", type=int, default=None, help="Keep each run's newest N checkpoints.")
@click.option("--keep-for", default=None, metavar="DURATION", help="Keep checkpoints younger than this (7d).")
@click.option(
    "--delete-finished-after", default=None, metavar="DURATION", help="Delete finished runs this old (30d)."
)
@click.option("--grace", default="0s", show_default=True, metavar="DURATION", help="Spare blobs this young.")
@click.option(
    "--vacuum",
    is_flag=True,
    help="SQLite: then rewrite the file without its free pages (once, for a file that keeps them).",
)
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
    vacuum: bool,
) -> None:
    """Prune checkpoints by retention, then delete blobs no checkpoint references.

    Without retention flags only runs with their own policy (set_retention)
    are pruned; blobs are always collected. Safe while agents are saving.
    On SQLite the file then gives its free pages back; a file created before
    safepoint made files that do (incremental auto-vacuum) needs one
    --vacuum, which needs the store to itself and free disk about the
    size of the file. --dry-run opens the store read-only and changes nothing.
    """
    if vacuum and dry_run:
        raise click.UsageError("--vacuum rewrites the file: it does not go with --dry-run")
    policy = None
    if keep_last is not None or keep_for is not None or delete_finished_after is not None:
        policy = Retention(
            keep_last=keep_last,
            keep_for=parse_duration(keep_for, "keep-for"),
            delete_finished_after=parse_duration(delete_finished_after, "delete-finished-after"),
        )
    wait = parse_duration(grace, "grace") or timedelta(0)
    vacuumed: FileSpace | None = None
    with open_store_at(store_url, read_only=True) if dry_run else open_existing(store_url) as store:
        if vacuum and store.driver.dialect != "sqlite":
            raise click.UsageError(
                "--vacuum is for SQLite: PostgreSQL reuses freed space after autovacuum"
                " (VACUUM FULL is a database administrator's call)"
            )
        with Progress(console=console, disable=as_json or not console.is_terminal, transient=True) as bar:
            task = bar.add_task("pruning runs", total=None)
            pruned = prune_store(
                store, policy, dry_run=dry_run, progress=lambda d, t: bar.update(task, completed=d, total=t)
            )
            bar.update(task, description="collecting blobs")
            collected = store.collect_garbage(grace=wait, dry_run=dry_run)
        if vacuum:
            size = _size(collected.database.bytes_after if collected.database else 0)
            click.echo(
                f"vacuum: rewriting the database file ({size}) in full. It needs the store to itself"
                f" (saves wait until it is done) and about {size} of free disk space.",
                err=True,
            )
            vacuumed = store.vacuum()
    space = vacuumed or collected.database
    data = {
        "dry_run": dry_run,
        "runs": pruned.runs,
        "checkpoints_pruned": pruned.checkpoints_pruned,
        "rows_deleted": pruned.rows_deleted,
        "row_bytes_deleted": pruned.bytes_deleted,
        "runs_deleted": pruned.runs_deleted,
        "blobs_deleted": collected.blobs_deleted,
        "bytes_freed": collected.bytes_freed,
        "blobs_kept": collected.blobs_kept,
        "blobs_held": collected.blobs_held,
        "database": None if space is None else _space_dict(space, collected.database),
        "vacuumed": vacuumed is not None,
    }
    start = collected.database.bytes_before if collected.database is not None else None
    emit(data, as_json, lambda: _summary(data, space, start, dry_run))


def _space_dict(space: FileSpace, before: FileSpace | None) -> dict[str, int | bool]:
    start = before.bytes_before if before is not None else space.bytes_before
    return {
        "bytes_before": start,
        "bytes_after": space.bytes_after,
        "bytes_freed": start - space.bytes_after,
        "free_bytes": space.free_bytes,
        "reclaims": space.reclaims,
    }


def _summary(data: dict[str, Any], space: FileSpace | None, start: int | None, dry: bool) -> None:
    """What gc did, in plain words (what it would do, for a dry run); ``start``: the file's size before.

    One word per thing throughout: a checkpoint is *pruned* (taken out of its
    run's history), a run or row or blob is *deleted*, a blob nothing deletes
    is *kept*, and the file's free pages are *given back* to the disk.
    """
    prune, delete, keep = (
        ("would prune", "would delete", "would keep") if dry else ("pruned", "deleted", "kept")
    )
    say("safepoint gc" + (" (dry run: nothing changed)" if dry else ""))
    say(f"  retention: {_n(data['runs'], 'run')} checked")
    say(f"    {prune} {_n(data['checkpoints_pruned'], 'checkpoint')} from their runs' histories")
    if data["runs_deleted"]:
        say(f"    {delete} {_n(len(data['runs_deleted']), 'finished run')} whole")
    stored = _size(data["row_bytes_deleted"])
    rows = _n(data["rows_deleted"], "checkpoint row")
    say(f"    {delete} {rows} (or only their headers): {stored} of stored data")
    blobs, freed = _n(data["blobs_deleted"], "blob"), _size(data["bytes_freed"])
    say(f"  blobs: {delete} {blobs} no checkpoint references ({freed}); {keep} {data['blobs_kept']:,}")
    if data["blobs_held"]:
        held = _n(data["blobs_held"], "unreferenced blob")
        say(f"    {keep} besides {held} that a backup in progress may need: the next gc deletes them")
    if space is None or start is None:
        say(
            "  database: PostgreSQL reuses the space of deleted rows after autovacuum (nothing is given back)"
        )
        return
    free = _size(space.free_bytes)
    if dry:
        gives = (
            "gc gives them back"
            if space.reclaims
            else "they are kept (safepoint gc --vacuum gives them back)"
        )
        say(f"  database file: {_size(start)}, {free} of it free pages; {gives}")
        return
    given = _size(max(start - space.bytes_after, 0))
    after = _size(space.bytes_after)
    say(f"  database file: {_size(start)} -> {after} ({given} of free pages given back to the disk)")
    if not space.reclaims and space.free_bytes:
        say(f"    {free} of free pages are kept, which SQLite reuses: the file was created without")
        say("    incremental auto-vacuum; safepoint gc --vacuum gives them back, once")


def _n(count: int, thing: str) -> str:
    return f"{count:,} {thing}" + ("" if count == 1 else "s")


def _size(count: int) -> str:
    """Bytes for people: 512 bytes, 12.3 kB, 4.5 MB, 1.2 GB (powers of 1,000)."""
    if count < 1000:
        return f"{count:,} bytes"
    for unit in ("kB", "MB", "GB", "TB"):
        count_f = count / 1000
        if count_f < 1000 or unit == "TB":
            return f"{count_f:.1f} {unit}"
        count = int(count_f)
    raise AssertionError("unreachable")
