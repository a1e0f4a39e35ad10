"""Garbage collection and vacuum, as operations: giving back space nothing refers to.

``collect_garbage`` deletes blobs no remaining row references. It holds the
blob guard exclusively (``blob_guard_exclusive``), which every save that
references blobs holds shared from inside its transaction until its commit.
External blobs are uploaded before that transaction, so a GC may delete one
between its upload and the save's transaction; the save re-checks its new
blobs under the shared guard and puts any missing one again
(``blob_targets.ExternalBlobs.write``), so a committed row never references a
deleted blob. Blobs a crashed save left behind (written, never committed) are
exactly the orphans it removes. On SQLite it then gives the file's free pages
back to the file system (``PRAGMA incremental_vacuum``, in a file created
with incremental auto-vacuum, which new stores are); the file shrinks at the
next WAL checkpoint, at the latest when the last connection closes. A file
created without it keeps its free pages (SQLite reuses them) until one full
``vacuum_store``.

A backup copying a filesystem blob folder holds its lock
(``FileSystemBlobStore.held_for_backup``); a collection that finds it held
deletes no blob of that folder this time and counts them in ``blobs_held``
(the next collection deletes them): the backup's snapshot may reference a
blob that no row references any more by now.

A dry run reads only: it takes no lock (on PostgreSQL a read-only
transaction refuses ``FOR UPDATE``), so what it reports is what a real run
would have done at that moment.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta

from safepoint import codec
from safepoint.blobs.filesystem import FileSystemBlobStore
from safepoint.records import from_micros
from safepoint.store.blob_targets import BlobTarget
from safepoint.store.query import UNSUPPORTED, Op, Query

from .loading import read_blobs


@dataclass(frozen=True, slots=True)
class FileSpace:
    """A SQLite file's size before and after a collection, and the free space left in it.

    ``reclaims`` says whether the file gives free pages back (created with
    incremental auto-vacuum); when False, ``free_bytes`` stay in the file,
    reused by later saves, until one full ``Store.vacuum()``.
    """

    bytes_before: int
    bytes_after: int
    free_bytes: int
    reclaims: bool

    @property
    def bytes_freed(self) -> int:
        return self.bytes_before - self.bytes_after


@dataclass(slots=True)
class GcResult:
    """What garbage collection found and did.

    ``bytes_freed`` counts blob bytes; ``database`` is the SQLite file's
    space (None on PostgreSQL, which reuses freed space after autovacuum
    instead of giving it back).
    """

    blobs_deleted: int = 0
    bytes_freed: int = 0
    blobs_kept: int = 0
    blobs_held: int = 0  # unreferenced, kept because a backup held the blob folder (in blobs_kept too)
    deleted: list[str] = field(default_factory=list)
    database: FileSpace | None = None


def collect_garbage(target: BlobTarget, now: int, grace: timedelta, *, dry_run: bool) -> Op[GcResult]:
    """Delete every blob no row references (and older than ``grace``), under the exclusive guard."""
    result = GcResult()
    if not dry_run:  # a dry run deletes nothing, so it needs no guard (and runs read only)
        yield Query("blob_guard_exclusive")
    referenced: set[str] = set()
    for (blobs,) in (yield Query("referenced_blobs")):
        referenced.update(codec.decode(blobs))
    cutoff = from_micros(now) - grace
    if not target.in_database:  # ExternalBlobs, or an encrypted store's SealedBlobs over one
        store = target.store  # type: ignore[attr-defined]
        # After the references are read: the order a backup's snapshot relies on.
        turn = store.collecting() if isinstance(store, FileSystemBlobStore) and not dry_run else _free()
        with turn as may_delete:
            for info in store.scan():
                if info.digest in referenced or info.created_at > cutoff:
                    result.blobs_kept += 1
                    continue
                if not may_delete:
                    result.blobs_kept += 1
                    result.blobs_held += 1
                    continue
                if dry_run or store.delete(info.digest):
                    result.blobs_deleted += 1
                    result.bytes_freed += info.stored_size
                    result.deleted.append(info.digest)
        result.database = yield from _release_free_pages(dry_run)
        return result
    doomed = []
    for digest, stored_size, created in (yield Query("stored_blobs")):
        if digest in referenced or from_micros(created) > cutoff:
            result.blobs_kept += 1
            continue
        doomed.append({"digest": digest})
        result.blobs_deleted += 1
        result.bytes_freed += stored_size
        result.deleted.append(digest)
    if doomed and not dry_run:
        yield Query("delete_blobs", many=doomed)
    result.database = yield from _release_free_pages(dry_run)
    return result


def drop_unreferenced(target: BlobTarget, known: list[str], holds: Callable[[bytes], bool]) -> Op[int]:
    """Delete the blobs no row references that a redaction took out: those it knows it replaced
    (``known``), and any other unreferenced blob whose content ``holds`` a finding — what an
    earlier, killed run of the same redaction replaced but never got to delete, or a crashed
    save left. Under the exclusive guard, no grace; other unreferenced blobs are gc's. How many
    were deleted. A filesystem blob folder a backup holds keeps them (gc deletes them later)."""
    yield Query("blob_guard_exclusive")
    referenced: set[str] = set()
    for (blobs,) in (yield Query("referenced_blobs")):
        referenced.update(codec.decode(blobs))
    wanted = set(known)
    if target.in_database:
        loose = [
            digest for digest, _size, _created in (yield Query("stored_blobs")) if digest not in referenced
        ]
        stored = (yield from read_blobs(loose)) if loose else {}
        doomed = [d for d in loose if d in wanted or holds(target.fetch([d], stored)[d])]
        if doomed:
            yield Query("delete_blobs", many=[{"digest": digest} for digest in doomed])
        return len(doomed)
    store = target.store  # type: ignore[attr-defined]
    turn = store.collecting() if isinstance(store, FileSystemBlobStore) else _free()
    deleted = 0
    with turn as may_delete:
        if not may_delete:
            return 0
        for info in list(store.scan()):
            digest = info.digest
            if digest in referenced:
                continue
            if digest in wanted or holds(target.fetch([digest], {})[digest]):
                deleted += bool(store.delete(digest))
    return deleted


@contextlib.contextmanager
def _free() -> Iterator[bool]:
    """A blob store with no backup lock: always free to delete."""
    yield True


def _release_free_pages(dry_run: bool) -> Op[FileSpace | None]:
    """Give the SQLite file's free pages back (see the module docstring); None on PostgreSQL."""
    rows = yield Query("database_pages", optional=True)
    if rows is UNSUPPORTED:  # PostgreSQL gives no space back to the file system on a delete
        return None
    pages, free, page_size, auto_vacuum = rows[0]
    reclaims = auto_vacuum == _INCREMENTAL
    before = pages * page_size
    if dry_run or not reclaims or not free:
        return FileSpace(before, before - (free * page_size if reclaims else 0), free * page_size, reclaims)
    yield Query("release_free_pages", many=[{}] * free, optional=True)
    ((pages, free, page_size, _),) = yield Query("database_pages", optional=True)
    return FileSpace(before, pages * page_size, free * page_size, reclaims)


_INCREMENTAL = 2  # PRAGMA auto_vacuum's value for incremental


def vacuum_store() -> Op[FileSpace | None]:
    """Rewrite the SQLite file without its free pages, switched to incremental auto-vacuum.

    SQLite's ``VACUUM`` cannot run inside a transaction: this operation ends
    the one its driver began, vacuums, and begins an empty one for the
    driver to commit. It needs the database to itself (it waits for the
    write lock, and for readers) and free disk space about the size of the
    file. None on PostgreSQL (``Store.vacuum`` refuses it before).
    """
    rows = yield Query("database_pages", optional=True)
    if rows is UNSUPPORTED:
        return None
    pages, _free, page_size, _mode = rows[0]
    yield Query("end_transaction", optional=True)
    yield Query("vacuum_incremental", optional=True)
    yield Query("vacuum", optional=True)
    yield Query("begin_transaction", optional=True)
    ((after, free, page_size, mode),) = yield Query("database_pages", optional=True)
    return FileSpace(pages * page_size, after * page_size, free * page_size, mode == _INCREMENTAL)
