"""``backup_store`` (``safepoint backup``): an online copy of a SQLite store and its blob
folder, taken while writers run, then checked as ``safepoint verify`` checks a store.

How a copy stays whole:

1. The blob folder is held for the backup (``FileSystemBlobStore.held_for_backup``)
   *before* the database is copied: from then on garbage collection deletes
   none of its blobs (it counts them as held, and the next one deletes them).
2. The database is copied in one read transaction (``sqlite/copy.py``:
   ``VACUUM INTO``): the store as one commit left it, writers unblocked.
3. The blobs the copy's rows reference (checkpoints and recorded calls) are
   copied from the folder, still held: each existed when the copy's snapshot
   was taken (a save writes its blobs before it commits), and none has been
   deleted since. Blobs written later, and orphans, are not copied.
4. The hold ends; the copy is opened read-only, with the store's keyring if
   it is encrypted, and verified: every checkpoint loaded (digests, messages,
   blobs against their hashes), every run row and recorded call.

Only then is it given its name: ``dest`` and ``dest.blobs`` beside it, the
layout ``open_store`` reads by default, so the copy *is* a store, and
restoring is backing the copy up again to where the store should live. Until
then the files are ``dest.partial`` and ``dest.partial.blobs``; a copy that
fails its check stays there, and a failed backup removes them.

An encrypted store's copy stays sealed: rows and blobs are copied as stored,
the data keys wrapped as the store holds them; the keyring never touches a
file, so the copy opens only with it. Values are in the database (or in
``safepoint_blobs`` with ``blobs="database"``) or in a local folder; a store
whose blobs are elsewhere (S3), a PostgreSQL store and a ``memory://`` one are
refused with the reason (docs/operations.md, "Backups", has their procedure).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from safepoint import codec
from safepoint.blobs.filesystem import FileSystemBlobStore, fsync_dir
from safepoint.errors import InvalidArgument, StoreError
from safepoint.visible import visible

from .facade import Store
from .opening import open_store
from .query import Op, Query
from .sqlite.copy import copy_database
from .tenants import tenant_path
from .urls import scheme_of, sqlite_path
from .verifying import VerifyReport, verify_store

PROCEDURE = "docs/operations.md, section Backups"


@dataclass(frozen=True, slots=True)
class BackupReport:
    """What a backup wrote and what its check found.

    ``database``: the copy's file (``….partial`` when the check failed);
    ``blobs``: its blob folder (None when no value was offloaded to files);
    ``verified``: the check of the copy; ``complete``: it passed.
    """

    database: Path
    database_bytes: int
    blobs: Path | None
    blobs_copied: int
    blob_bytes: int
    encrypted: bool
    verified: VerifyReport

    @property
    def complete(self) -> bool:
        return self.verified.ok


def backup_store(store: Store, dest: str | os.PathLike[str]) -> BackupReport:
    """Copy the SQLite ``store`` and the blobs it references to the new file ``dest``, and verify it.

    ``InvalidArgument`` for a store that is not a SQLite file with local blobs
    or a ``dest`` that exists; ``StoreError`` when the copy cannot be written.
    """
    source, folder = _source(store)
    final = Path(dest).absolute()
    partial = final.with_name(final.name + ".partial")
    final_blobs, partial_blobs = _blobs_of(final), _blobs_of(partial)
    # A stale -wal beside the new file would be read as its log: it counts as the file existing.
    sides = [Path(f"{final}{suffix}") for suffix in ("-wal", "-shm")]
    for path in (final, final_blobs, partial, partial_blobs, *sides):
        if os.path.lexists(path):
            raise InvalidArgument(
                f"the backup's destination {visible(str(path))} exists: a backup never overwrites"
                " anything; give a new path"
            )
    _writable(final.parent)
    sealer = store.settings.sealer
    options: dict[str, Any] = {"read_only": True}
    if sealer is not None:
        options["encryption"] = sealer.keyring  # the copy opens with the store's keyring, or not at all
    if store.settings.blobs is None:
        options["blobs"] = False
    elif store.settings.blobs.in_database:
        options["blobs"] = "database"
    try:
        with folder.held_for_backup() if folder is not None else contextlib.nullcontext():
            size = copy_database(source, partial)
            with open_store(f"sqlite:///{quote(str(partial))}", **options) as copy:
                referenced = copy.driver.run(_referenced_blobs(), write=False)
                copied, nbytes = _copy_blobs(folder, referenced, partial_blobs) if folder else (0, 0)
        with open_store(f"sqlite:///{quote(str(partial))}", **options) as copy:
            verified = verify_store(copy)
        _drop_side_files(partial)
        has_blobs = partial_blobs.is_dir()
        blobs = partial_blobs if has_blobs else None
        if not verified.ok:
            return BackupReport(partial, size, blobs, copied, nbytes, sealer is not None, verified)
        if has_blobs:
            os.replace(partial_blobs, final_blobs)
        os.replace(partial, final)  # last: a file under the final name is a whole, verified copy
        fsync_dir(final.parent)
    except BaseException:
        _drop_side_files(partial)
        partial.unlink(missing_ok=True)
        shutil.rmtree(partial_blobs, ignore_errors=True)
        raise
    return BackupReport(
        final, size, final_blobs if has_blobs else None, copied, nbytes, sealer is not None, verified
    )


def check_backup_source(url: str) -> None:
    """``InvalidArgument`` saying why, when the store at ``url`` is not one ``backup_store`` copies
    (a ``memory://`` or PostgreSQL store); asked before anything is opened."""
    scheme = scheme_of(url)
    if scheme == "memory":
        raise InvalidArgument("a memory:// store lives only inside its process: there is no file to back up")
    if scheme == "postgresql":
        raise InvalidArgument(
            "a PostgreSQL store is backed up with pg_dump of its schema (and a copy of its bucket):"
            f" see {PROCEDURE}"
        )


def _source(store: Store) -> tuple[str, FileSystemBlobStore | None]:
    """The database file to copy and the blob folder to hold, or why this store has no backup here."""
    check_backup_source(store.url)
    target = store.settings.blobs
    database = tenant_path(sqlite_path(store.url), store.tenant)  # a file per tenant (tenants.py)
    if target is None or target.in_database:
        return database, None
    external = target.store  # type: ignore[attr-defined]  # ExternalBlobs, or SealedBlobs over one
    if not isinstance(external, FileSystemBlobStore):
        raise InvalidArgument(
            f"this store's blobs are in {type(external).__name__}, not in a local folder: copy the database"
            f" with safepoint backup after copying the bucket is not consistent; see {PROCEDURE}"
        )
    return database, external


def _referenced_blobs() -> Op[set[str]]:
    """Every blob the copy's rows reference (garbage collection's mark, on the copy)."""
    found: set[str] = set()
    for (blobs,) in (yield Query("referenced_blobs")):
        found.update(codec.decode(blobs))
    return found


def _copy_blobs(folder: FileSystemBlobStore, digests: set[str], dest: Path) -> tuple[int, int]:
    """Copy each of ``digests`` from ``folder`` into the same layout under ``dest``, durably.

    A referenced blob missing from the folder is not copied: the copy's check
    then names it (``BlobNotFound``), as ``safepoint verify`` does on the store.
    """
    copied = nbytes = 0
    directories: set[Path] = set()
    for digest in sorted(digests):
        source = folder.path_for(digest)
        target = dest / source.relative_to(folder.root)
        if not target.parent.is_dir():
            target.parent.mkdir(parents=True)
            directories.update({target.parent, target.parent.parent, dest})
        try:
            shutil.copyfile(source, target)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreError(f"cannot copy blob {digest} into the backup: {exc.strerror}") from exc
        fd = os.open(target, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
            nbytes += os.fstat(fd).st_size
        finally:
            os.close(fd)
        copied += 1
    for directory in sorted(directories, key=lambda path: len(path.parts), reverse=True):
        fsync_dir(directory)
    return copied, nbytes


def _blobs_of(database: Path) -> Path:
    """Where a store at ``database`` keeps its blobs by default (``backends._file_blobs``)."""
    return database.with_name(database.name + ".blobs")


def _writable(folder: Path) -> None:
    """Make ``folder`` (and its parents) if missing; ``StoreError`` when it cannot hold the backup."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot make the backup's folder {visible(str(folder))}: {exc.strerror}") from exc
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(f"cannot write the backup in {visible(str(folder))}: permission denied")


def _drop_side_files(database: Path) -> None:
    """Remove what opening the copy left beside it (an empty WAL and its index): they are no
    part of the copy, and a stale one beside a restored file would be read as its log."""
    for suffix in ("-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
