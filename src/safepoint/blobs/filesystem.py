"""Blobs as files under a directory: the default beside a SQLite store.

Layout: ``<root>/ab/cd/abcd…`` (two fan-out levels from the digest, so no
directory holds more than a few thousand entries even with many millions of
blobs). Nothing else is needed: the file name is the digest, and its mtime is
when it was written.

A write never exposes a partial file under a digest: the bytes go to a temp
file (``.tmp-…``) in the destination directory, are fsynced, renamed over the
final name with ``os.replace`` (atomic on POSIX) and the directory is fsynced
so the rename itself survives a power loss. Concurrent writers of one digest
each write their own temp file; whichever rename lands last, the file holds
the same content. A crash leaves at most a temp file, which reads and scans
ignore and ``sweep_temp`` (or ``scan``, once it is old) removes.

Backups and garbage collection share ``<root>/.backup-lock`` (``flock``):
a backup holds it shared from before its database snapshot until it has
copied the blobs that snapshot references (``held_for_backup``); garbage
collection asks for it exclusively, without waiting, after it has read which
blobs rows reference (``collecting``), and deletes nothing while a backup
holds it. A blob a snapshot references can stop being referenced a moment
later (a run deleted, a checkpoint pruned) and be old enough for any grace,
so no grace period protects a backup; the lock does. The kernel releases it
when its holder exits, however it exits: a killed backup leaves no stale lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from safepoint.blobs.base import TENANTS, BlobInfo, BundledStore, check_digest, check_tenant_name
from safepoint.errors import BlobError, BlobNotFound, InvalidArgument

TEMP_PREFIX = ".tmp-"
BACKUP_LOCK = ".backup-lock"  # in the root; not a fan-out directory, so scans never see it
_HEX = frozenset("0123456789abcdef")
_FILE_MODE = 0o644
# Well past the moment a concurrent writer fsyncs the directory after its rename.
_RECENT_WRITE_SECONDS = 60.0


class FileSystemBlobStore(BundledStore):
    """A ``BlobStore`` over a local directory, created on the first ``put``.

    ``compress=True`` stores zstd frames when they are smaller; either setting
    reads what the other wrote. ``temp_file_grace`` is how old a temp file
    must be before ``scan`` removes it as a crash leftover: longer than any
    single write can take.
    """

    def __init__(
        self, root: str | Path, *, compress: bool = False, temp_file_grace: timedelta = timedelta(hours=1)
    ) -> None:
        if not isinstance(root, str | Path) or not str(root):
            raise InvalidArgument("filesystem blob store root must be a non-empty path")
        self.root = Path(root)
        self.compress = compress
        self.temp_file_grace = temp_file_grace
        self._name = f"filesystem blob store {self.root}"

    def __repr__(self) -> str:
        return f"FileSystemBlobStore({str(self.root)!r}, compress={self.compress})"

    def for_tenant(self, tenant: str) -> FileSystemBlobStore:
        """The same kind of store, rooted at ``<root>/tenants/<tenant>``: a tenant's blobs in a
        folder shared by many (``open_store(..., blobs=…, tenant=…)``), named apart from every
        other tenant's. A scan of this root never lists them (``tenants`` is no fan-out folder)."""
        name = check_tenant_name(tenant)
        return FileSystemBlobStore(
            self.root / TENANTS / name, compress=self.compress, temp_file_grace=self.temp_file_grace
        )

    def path_for(self, digest: str) -> Path:
        """Where the blob with ``digest`` lives (whether or not it exists)."""
        check_digest(digest)
        return self.root / digest[:2] / digest[2:4] / digest

    def _read(self, digest: str) -> bytes:
        path = self.path_for(digest)
        self._check_open()
        with self._failing("read", digest):
            try:
                return path.read_bytes()
            except FileNotFoundError:
                raise BlobNotFound(digest) from None

    def _write(self, digest: str, make: Callable[[], bytes], *, replace: bool) -> None:
        final = self.path_for(digest)
        with self._failing("write", digest):
            if replace or not self._already_stored(final):
                self._write_atomically(final, make())  # a rename: readers see old or new

    def exists(self, digest: str) -> bool:
        """True when ``digest`` is stored; see ``BlobStore.exists``."""
        path = self.path_for(digest)
        self._check_open()
        with self._failing("check", digest):
            return path.is_file()

    def delete(self, digest: str) -> bool:
        """Remove ``digest``; see ``BlobStore.delete``.

        Fan-out directories stay: removing one could race a concurrent
        ``put`` that is about to create its temp file there.
        """
        path = self.path_for(digest)
        self._check_open()
        with self._failing("delete", digest):
            try:
                path.unlink()
            except FileNotFoundError:
                return False
        return True

    def scan(self) -> Iterator[BlobInfo]:
        """Yield every complete blob in digest order; see ``BlobStore.scan``.

        Removes temp files older than ``temp_file_grace`` on the way.
        """
        self._check_open()
        stale_before = datetime.now(UTC) - self.temp_file_grace
        try:
            for leaf in self._leaf_dirs():
                for entry in sorted(_entries(leaf), key=lambda item: item.name):
                    if entry.name.startswith(TEMP_PREFIX):
                        _remove_if_older(entry, stale_before)
                    elif _is_blob_file(entry, leaf):
                        info = _info(entry)
                        if info is not None:
                            yield info
        except OSError as exc:
            raise BlobError(f"{self._name}: cannot scan: {_reason(exc)}") from exc

    def sweep_temp(self, older_than: timedelta = timedelta(hours=1)) -> int:
        """Remove temp files older than ``older_than`` (crash leftovers); return how many.

        A temp file younger than that may belong to a write in progress, in
        this or another process, so it is left alone.
        """
        self._check_open()
        before = datetime.now(UTC) - older_than
        try:
            return sum(
                _remove_if_older(entry, before)
                for leaf in self._leaf_dirs()
                for entry in _entries(leaf)
                if entry.name.startswith(TEMP_PREFIX)
            )
        except OSError as exc:
            raise BlobError(f"{self._name}: cannot sweep temp files: {_reason(exc)}") from exc

    @contextlib.contextmanager
    def held_for_backup(self) -> Iterator[None]:
        """Hold the folder for a backup: garbage collection deletes no blob until this ends.

        Waits for a collection that is deleting right now to finish (it holds
        no database lock a backup needs, so this cannot deadlock). Creates the
        root (empty) when no blob has been written yet. A folder on a
        read-only file system (a backup restored from read-only media) needs
        no hold: nothing can delete there.
        """
        self._check_open()
        fd = self._backup_lock()
        if fd is None:
            yield
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
            except OSError as exc:
                raise BlobError(f"{self._name}: cannot hold for a backup: {_reason(exc)}") from exc
            yield
        finally:
            os.close(fd)  # releases the lock

    def _backup_lock(self) -> int | None:
        """The lock file, open (made if missing); None on a read-only file system without one."""
        path = self.root / BACKUP_LOCK
        try:
            _make_dirs_durably(self.root)
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, _FILE_MODE)
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES):
                raise BlobError(f"{self._name}: cannot hold for a backup: {_reason(exc)}") from exc
            refused = exc
        try:  # flock needs no write access: an existing lock file open for reading will do
            return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            if refused.errno == errno.EROFS:
                return None
            raise BlobError(f"{self._name}: cannot hold for a backup: {_reason(refused)}") from refused
        except OSError as exc:
            raise BlobError(f"{self._name}: cannot hold for a backup: {_reason(exc)}") from exc

    @contextlib.contextmanager
    def collecting(self) -> Iterator[bool]:
        """Garbage collection's turn to delete: True when no backup holds the folder (and none
        can take it until this ends), False while one does, without waiting for it.

        Asked after the collector has read which blobs rows reference (see the
        module docstring for why that order makes a snapshot taken at any
        moment safe).
        """
        self._check_open()
        fd = self._collector_lock()
        if fd is None:
            yield True
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held = True
            except OSError as exc:
                raise BlobError(f"{self._name}: cannot lock for garbage collection: {_reason(exc)}") from exc
            else:
                held = False
            yield not held
        finally:
            os.close(fd)

    def _collector_lock(self) -> int | None:
        """The lock file, open for reading (``flock`` needs no more); None when there is none.

        Garbage collection never makes it: a backup makes it before it holds
        it, so a collector that finds none after reading the references is
        in the safe order (see the module docstring).
        """
        try:
            return os.open(self.root / BACKUP_LOCK, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise BlobError(f"{self._name}: cannot lock for garbage collection: {_reason(exc)}") from exc

    @contextlib.contextmanager
    def _failing(self, verb: str, digest: str) -> Iterator[None]:
        """An ``OSError`` inside, as the ``BlobError`` that names what could not be done to which blob."""
        try:
            yield
        except OSError as exc:
            raise BlobError(f"{self._name}: cannot {verb} blob {digest}: {_reason(exc)}") from exc

    def _leaf_dirs(self) -> Iterator[Path]:
        """The ``ab/cd`` directories, in order; none when the root does not exist yet."""
        for top in sorted(_entries(self.root), key=lambda item: item.name):
            if _is_fanout(top):
                for leaf in sorted(_entries(Path(top.path)), key=lambda item: item.name):
                    if _is_fanout(leaf):
                        yield Path(leaf.path)

    def _already_stored(self, final: Path) -> bool:
        """True when ``final`` exists, and then durably so.

        A file renamed in moments ago by another process may still have its
        directory entry unsynced (that writer fsyncs the directory right
        after), so a recent file costs one directory fsync; older ones cost
        nothing beyond the stat.
        """
        try:
            stat = os.stat(final)
        except FileNotFoundError:
            return False
        if time.time() - stat.st_mtime < _RECENT_WRITE_SECONDS:
            fsync_dir(final.parent)
        return True

    def _write_atomically(self, final: Path, stored: bytes) -> None:
        directory = final.parent
        temp = directory / f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(8)}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            fd = os.open(temp, flags, _FILE_MODE)
        except FileNotFoundError:
            _make_dirs_durably(directory)
            fd = os.open(temp, flags, _FILE_MODE)
        try:
            try:
                _write_all(fd, stored)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, final)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        fsync_dir(directory)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(directory: Path) -> None:
    """Make a folder's entries durable (a rename or a new file in it survives a power cut)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_dirs_durably(directory: Path) -> None:
    """Create ``directory`` and any missing parents, fsyncing each parent.

    The parent is fsynced even when another process won the race to create
    the directory: its entry must be durable before our blob is.
    """
    if directory.is_dir():
        return
    _make_dirs_durably(directory.parent)
    with contextlib.suppress(FileExistsError):
        directory.mkdir()
    fsync_dir(directory.parent)


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as listing:
            return list(listing)
    except FileNotFoundError:
        return []


def _is_fanout(entry: os.DirEntry[str]) -> bool:
    return len(entry.name) == 2 and set(entry.name) <= _HEX and entry.is_dir(follow_symlinks=False)


def _is_blob_file(entry: os.DirEntry[str], leaf: Path) -> bool:
    """A digest-named regular file in the directory its digest places it in."""
    name = entry.name
    return (
        len(name) == 64
        and set(name) <= _HEX
        and name[:2] == leaf.parent.name
        and name[2:4] == leaf.name
        and entry.is_file(follow_symlinks=False)
    )


def _info(entry: os.DirEntry[str]) -> BlobInfo | None:
    try:
        stat = entry.stat(follow_symlinks=False)
    except FileNotFoundError:  # deleted since the directory was listed
        return None
    return BlobInfo(entry.name, stat.st_size, datetime.fromtimestamp(stat.st_mtime, UTC))


def _remove_if_older(entry: os.DirEntry[str], before: datetime) -> bool:
    try:
        if datetime.fromtimestamp(entry.stat(follow_symlinks=False).st_mtime, UTC) >= before:
            return False
        os.unlink(entry.path)
    except FileNotFoundError:  # its writer renamed or removed it meanwhile
        return False
    return True


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
