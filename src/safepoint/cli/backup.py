"""``safepoint backup``: a verified online copy of a SQLite store and its blobs; restoring is
the same command run from the copy to where the store should live."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from safepoint.cli.output import ExitCode, emit, handle_errors, open_store_at, say, store_options
from safepoint.store.admin import BackupReport, backup_store, check_backup_source
from safepoint.visible import visible


@click.command()
@store_options
@click.argument("dest", metavar="DEST")
@handle_errors
def backup(*, store_url: str, as_json: bool, dest: str) -> None:
    """Copy the store and the blobs it references to the new file DEST while agents keep
    saving, then verify the copy as safepoint verify does.

    SQLite stores: DEST is the copy's database file, with its blobs in DEST.blobs
    beside it; nothing there may exist. A concurrent gc deletes no blob until the
    copy holds what it references. An encrypted store's copy stays sealed: it opens
    with the store's keyring only. Restore by backing the copy up again to where
    the store should live (no file there yet):

      safepoint backup --store sqlite:///backup/state.db .safepoint/state.db

    PostgreSQL stores are backed up with pg_dump (docs/operations.md, Backups).
    Exits 1 when the copy fails its check (it is then left at DEST.partial).
    """
    check_backup_source(store_url)  # before opening anything
    with open_store_at(store_url, read_only=True) as store:
        report = backup_store(store, dest)
    data = {
        "database": str(report.database),
        "database_bytes": report.database_bytes,
        "blobs": None if report.blobs is None else str(report.blobs),
        "blobs_copied": report.blobs_copied,
        "blob_bytes": report.blob_bytes,
        "encrypted": report.encrypted,
        "complete": report.complete,
        "verified": {
            "runs": report.verified.runs,
            "checkpoints": report.verified.checked,
            "calls": report.verified.calls,
            "failures": report.verified.failures,
        },
    }
    emit(data, as_json, lambda: _summary(report))
    if not report.complete:
        sys.exit(ExitCode.FAILURE)


def _summary(report: BackupReport) -> None:
    checked = report.verified
    sealed = " (encrypted: it opens only with the store's keyring)" if report.encrypted else ""
    say(f"backup: {_shown(report.database)}, {report.database_bytes:,} bytes{sealed}")
    if report.blobs is not None:
        say(f"  blobs: {report.blobs_copied:,} ({report.blob_bytes:,} bytes) in {_shown(report.blobs)}")
    else:
        say("  blobs: none to copy")
    say(
        f"  verified the copy: {checked.runs:,} runs, {checked.checked:,} checkpoints and"
        f" {checked.calls:,} recorded calls: {len(checked.failures)} failed"
    )
    for failure in checked.failures:
        say(f"    {failure['error']}: {visible(failure['message'])}")
    if not report.complete:
        say(f"  the copy is NOT a backup: it is left at {_shown(report.database)} for a look")


def _shown(path: Path) -> str:
    return visible(str(path))
