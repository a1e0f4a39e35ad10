"""Erasing a tenant: ``erase_tenant`` (``safepoint tenant erase``) deletes everything it holds.

In this order, each step a transaction of its own (or, for files and blob
objects, one deletion each), each deleting what it finds, so that a kill at
any instant leaves a state the next run continues from:

1. **The mark and the data keys** (one transaction). A meta row marks the
   tenant as being erased, so that no open of it succeeds from now on
   (``encryption.open_encryption`` refuses it with ``StoreNotFound``): no
   process makes it a new data key or writes beside what is being deleted.
   On an encrypted tenant its data keys are deleted in the same commit:
   from then on nothing of the tenant opens, whatever keyring is given —
   the crypto-erasure, done before anything slower, so that a kill during
   the rest leaves ciphertext no key opens. (On SQLite with
   ``secure_delete`` on, and the WAL cut to nothing after.)
2. **The runs**, a page of runs per transaction, each with its checkpoints,
   call journal and redaction records.
3. **The blobs**: the tenant's rows in the database blob table, a page per
   transaction, then every object of the tenant's namespace in an external
   blob store (``open_store``'s ``blobs=``), one deletion each.
4. **The meta rows** (store id, index key check value, encryption state,
   the mark): the tenant holds nothing any more, and a later open of that
   name starts a new, empty tenant.

On SQLite a tenant is a file (``tenants.tenant_path``): step 1 runs in it,
then its blob folder goes, then its ``-wal``, ``-shm`` and ``-journal``
files, then the file itself — the file last, since its presence is what a
rerun continues from (and a stale WAL must never meet a new file of that
name). Steps 2 and 4 are the file's removal. The implicit tenant's file is
the store's own file, which the other tenants' folder and every backup are
named after: erasing it is refused on SQLite (``InvalidArgument``); delete
the file as any other file if that is meant. On PostgreSQL the implicit
tenant is rows like any other's and is erased like them.

What an erase cannot reach — copies made before it (backups, replicas,
dumps, WAL archives) — only the tenant's keys reach: they hold the tenant's
data keys wrapped under its key-encryption keys, never those keys. Destroy
the tenant's keyring (every KEK and its index key) as well, and those copies
hold nothing that opens (docs/tenants.md, "Keys per tenant and erasure").
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safepoint.blobs.base import BlobStore
from safepoint.errors import InvalidArgument, StoreError, StoreNotFound

from .blob_targets import ExternalBlobs, blob_target
from .ops.erasing import Held, drop_blob_rows, drop_meta, drop_runs, held, mark_and_drop_keys
from .query import Driver
from .tenants import IMPLICIT, check_tenant, tenant_path
from .urls import scheme_of, sqlite_path

__all__ = ["EraseProgress", "Erasure", "erase_tenant", "tenant_held"]

# Called after each step with its name and how much it deleted: "data_keys", "runs" (a page),
# "blob_rows" (a page), "blob_objects" (one), "meta", "blob_folder", "files" (SQLite).
EraseProgress = Callable[[str, int], None]
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


@dataclass(slots=True)
class Erasure:
    """What one ``erase_tenant`` pass found and deleted (a rerun after a kill counts only its own)."""

    tenant: str
    encrypted: bool = False  # the tenant had a store id when this pass began
    data_keys: int = 0
    runs: int = 0
    blob_rows: int = 0
    blob_objects: int = 0
    meta: int = 0
    files: list[str] | None = None  # SQLite: the files and folders removed

    @property
    def found(self) -> bool:
        """Whether this pass found anything of the tenant at all."""
        return bool(
            self.data_keys or self.runs or self.blob_rows or self.blob_objects or self.meta or self.files
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "encrypted": self.encrypted,
            "data_keys": self.data_keys,
            "runs": self.runs,
            "blob_rows": self.blob_rows,
            "blob_objects": self.blob_objects,
            "meta": self.meta,
            "files": list(self.files or []),
            "found": self.found,
        }


def erase_tenant(url: str, tenant: str, *, progress: EraseProgress | None = None, **options: Any) -> Erasure:
    """Delete everything ``tenant`` holds in the store at ``url`` (the module docstring).

    ``options``: ``blobs`` (the blob store the tenant's large values are in,
    when not the store's default: its objects under the tenant's namespace
    are deleted), ``blob_compress`` (ignored), and the backend's own
    (``schema``, ``connect_timeout``, … on PostgreSQL; ``busy_timeout`` on
    SQLite). No keyring is needed: an erase opens nothing sealed.

    Resumable: killed at any point, run it again and it finishes; run on an
    erased (or never used) tenant it deletes nothing and says so
    (``Erasure.found``). Stop the tenant's writers first: a process that had
    the tenant open before the erase began may still write to it.
    ``StoreNotFound`` when there is no store at ``url``; ``InvalidArgument``
    for the implicit tenant of a SQLite store.
    """
    tenant = check_tenant(tenant)
    scheme = scheme_of(url)
    options = dict(options)
    blobs_option = options.pop("blobs", None)
    options.pop("blob_compress", None)
    step = progress if progress is not None else _nothing
    if scheme == "memory":
        raise InvalidArgument("a memory:// store is private to its handle: there is no tenant to erase")
    if scheme == "sqlite":
        return _erase_sqlite(sqlite_path(url), tenant, blobs_option, options, step)
    return _erase_postgres(url, tenant, blobs_option, options, step)


def tenant_held(url: str, tenant: str, **options: Any) -> Held:
    """How many rows of each table ``tenant`` holds (read-only; a SQLite tenant without a file
    holds nothing). What an erase leaves is ``Held()``."""
    tenant = check_tenant(tenant)
    options = dict(options)
    options.pop("blobs", None)
    if scheme_of(url) == "sqlite":
        path = tenant_path(sqlite_path(url), tenant)
        if not os.path.exists(path):
            return Held()
        with _sqlite(path, options, read_only=True) as driver:
            return driver.run(held(), write=False)
    with _postgres(url, tenant, options, read_only=True) as driver:
        return driver.run(held(), write=False)


def _nothing(step: str, count: int) -> None:
    del step, count


# -- PostgreSQL --------------------------------------------------------------------------


def _erase_postgres(
    url: str, tenant: str, blobs_option: Any, options: dict[str, Any], step: EraseProgress
) -> Erasure:
    report = Erasure(tenant)
    blobs = _tenant_blobs(blobs_option, tenant)
    try:
        # StoreNotFound, and nothing created, when there is no store there (as open_existing):
        # a StoreError means one is there (an older one, which the read-write open upgrades) or
        # the server cannot be reached, which the open below says.
        with contextlib.suppress(StoreError), _postgres(url, tenant, options, read_only=True):
            pass
        with _postgres(url, tenant, options, read_only=False) as driver:
            if driver.run(held(), write=False).total == 0 and blobs is None:
                return report  # nothing there: no mark written, nothing to delete
            report.encrypted, report.data_keys = driver.run(mark_and_drop_keys(), write=True)
            step("data_keys", report.data_keys)
            while deleted := driver.run(drop_runs(), write=True):
                report.runs += deleted
                step("runs", deleted)
            while deleted := driver.run(drop_blob_rows(), write=True):
                report.blob_rows += deleted
                step("blob_rows", deleted)
            if blobs is not None:
                report.blob_objects = _drop_objects(blobs.store, step, whole=tenant != IMPLICIT)
            report.meta = driver.run(drop_meta(), write=True)
            step("meta", report.meta)
    finally:
        if blobs is not None and _ours(blobs_option, tenant):
            blobs.close()
    return report


@contextlib.contextmanager
def _postgres(url: str, tenant: str, options: dict[str, Any], *, read_only: bool) -> Iterator[Driver]:
    from .postgres.config import PostgresConfig  # noqa: PLC0415  (SQLite users never load psycopg)
    from .postgres.driver import PostgresDriver  # noqa: PLC0415

    config = PostgresConfig.from_options(url, {**options, "tenant": tenant, "read_only": read_only})
    driver = PostgresDriver.open(config)
    try:
        yield driver
    finally:
        driver.close()


# -- SQLite ------------------------------------------------------------------------------


def _erase_sqlite(
    store_path: str, tenant: str, blobs_option: Any, options: dict[str, Any], step: EraseProgress
) -> Erasure:
    if tenant == IMPLICIT:
        raise InvalidArgument(
            "the implicit tenant of a SQLite store is the store's own file, which its other tenants'"
            " folder and its backups are named after: it is not erased (delete the file itself if that"
            " is meant)"
        )
    if not os.path.exists(store_path) and not os.path.isdir(os.path.dirname(tenant_path(store_path, tenant))):
        # A store used through named tenants only has their folder and no file of its own.
        raise StoreNotFound(f"sqlite:///{store_path}", "no such file")
    report = Erasure(tenant, files=[])
    assert report.files is not None
    path = tenant_path(store_path, tenant)
    external = _tenant_blobs(blobs_option, tenant) if blobs_option not in (None, False) else None
    try:
        if os.path.exists(path):
            with _sqlite(path, options, read_only=False) as driver:
                before = driver.run(held(), write=False)
                report.encrypted, report.data_keys = driver.run(mark_and_drop_keys(), write=True)
            report.runs, report.blob_rows, report.meta = before.runs, before.blobs, before.meta
            step("data_keys", report.data_keys)
        if external is not None:
            report.blob_objects = _drop_objects(external.store, step, whole=True)
    finally:
        if external is not None and _ours(blobs_option, tenant):
            external.close()
    folder = path + ".blobs"
    if os.path.isdir(folder):
        shutil.rmtree(folder)
        report.files.append(folder)
        step("blob_folder", 1)
    for name in (*(path + side for side in _SQLITE_SIDE_FILES), path):
        with contextlib.suppress(FileNotFoundError):
            os.remove(name)
            report.files.append(name)
            step("files", 1)
    _sync_folder(os.path.dirname(path))
    return report


@contextlib.contextmanager
def _sqlite(path: str, options: dict[str, Any], *, read_only: bool) -> Iterator[Driver]:
    from .sqlite.driver import SQLiteDriver  # noqa: PLC0415

    unknown = set(options) - {"busy_timeout"}
    if unknown:
        raise InvalidArgument("erase_tenant takes only busy_timeout (and blobs) for a SQLite store")
    driver = SQLiteDriver(path, read_only=read_only, **options)
    try:
        yield driver
    finally:
        driver.close()


def _sync_folder(folder: str) -> None:
    """The removals made durable (the folder's entries), where the platform allows it."""
    with contextlib.suppress(OSError):
        fd = os.open(folder or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# -- external blobs ----------------------------------------------------------------------


def _tenant_blobs(option: Any, tenant: str) -> ExternalBlobs | None:
    """The tenant's namespace in the blob store ``option`` names (``open_store``'s ``blobs=``:
    ``tenants/<tenant>/`` in it for a named tenant, its root for the implicit one, as
    ``blob_targets.blob_target`` opens it for a store), or None when its blobs are not in an
    external store. The caller closes it."""
    if option is None or option is False or option == "database":
        return None
    target = blob_target(option, None, False, tenant=tenant)
    assert isinstance(target, ExternalBlobs)
    return target


def _ours(option: Any, tenant: str) -> bool:
    """Whether the erase opened the blob store it used (from a URL), or a tenant's view of a
    given one, and so closes it: a blob store the caller gave for the implicit tenant is used
    as it is, and stays the caller's to close."""
    return isinstance(option, str) or tenant != IMPLICIT


def _drop_objects(blobs: BlobStore, step: EraseProgress, *, whole: bool) -> int:
    """Every object of the tenant's namespace deleted, one at a time: how many. ``whole``: the
    namespace is the tenant's alone (a named tenant's), so its folder goes too; the implicit
    tenant's is the blob store's root, which holds the other tenants' namespaces."""
    deleted = 0
    try:
        names = [info.digest for info in blobs.scan()]
    except OSError as exc:  # pragma: no cover - the bundled stores raise BlobError themselves
        raise StoreError("listing the tenant's blobs failed") from exc
    for digest in names:
        if blobs.delete(digest):
            deleted += 1
            step("blob_objects", 1)
    root = getattr(blobs, "root", None)
    if whole and isinstance(root, Path) and root.is_dir():
        shutil.rmtree(root, ignore_errors=True)  # the namespace's empty fan-out folders
    return deleted
