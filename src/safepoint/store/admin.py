"""Operators' tools over a whole store: what the CLI (and the inspector) use beyond ``Store``.

These walk or rewrite every run, a transaction at a time, through the public
``Store`` API — so they sit above the facade, while the operations they call
(``retention``, ``collect``, ``rewrite``) sit below it:

- ``all_runs`` lists every run, page by page.
- ``migrate_store`` (``safepoint migrate``) lists the runs whose head is older
  than the store's migration chain and migrates them in batches, one
  transaction per batch (``Store.migrate_runs``). It is resumable by
  construction: a rerun lists only the runs still behind, so an interrupted
  migration picks up where it stopped. Concurrent saves keep working — each
  batch holds the write lock only for its own transaction, and a worker whose
  checkpoint was rewritten under it re-plans its next save against the new
  head. History checkpoints are not rewritten: they are migrated on read.
- ``prune_store`` (``safepoint gc``) applies retention run by run (one
  transaction each, so it never holds a lock for long and is safe to
  interrupt); ``Store.collect_garbage`` then deletes the blobs nothing
  references any more. Both report what they did, or would do with ``dry_run``.

- ``verify_store`` (``safepoint verify``) checks every checkpoint, run row and
  recorded call, blobs included (``verifying.py``); ``backup_store``
  (``safepoint backup``) writes a SQLite store's online copy and checks it
  the same way (``backup.py``).

- ``encrypt_store``, ``rekey_store`` and ``key_status`` (``safepoint encrypt``,
  ``safepoint rekey``) are encryption at rest's: ``store/keys.py``.
- ``erase_tenant`` and ``tenant_held`` (``safepoint tenant erase``): a tenant
  deleted with everything it holds, its data keys first (``store/erasing.py``).

``scheme_of`` and ``split_schema`` read a store URL the way ``open_store``
does; ``IMPLICIT_TENANT`` is the tenant of a handle opened without ``tenant=``
(``tenants.py``), which the CLI and the inspector do not name; ``check_tenant``
checks a tenant name as ``open_store`` does (a worker's list of tenants);
``tenants_of`` and ``tenant_summaries`` are the operator view across tenants
(``tenant_listing.py``: a role that passes row-level security only). The CLI imports
these from here and nothing else under ``safepoint.store`` except the package
itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from safepoint.errors import CorruptCheckpoint, InvalidArgument, NotFound, SafepointError
from safepoint.records import Retention, RunInfo

from .backup import BackupReport, backup_store, check_backup_source
from .erasing import Erasure, erase_tenant, tenant_held
from .facade import Store
from .keys import KeyStatus, Resealing, ToEncrypt, encrypt_store, key_status, rekey_store
from .keys import Progress as KeyProgress
from .ops.collect import FileSpace
from .ops.leases import QueueState
from .ops.retention import PruneResult
from .tenant_listing import TenantSummary, tenant_summaries, tenants_of
from .tenants import IMPLICIT as IMPLICIT_TENANT
from .tenants import check_tenant
from .urls import scheme_of, split_schema
from .verifying import VerifyReport, verify_store

__all__ = [
    "IMPLICIT_TENANT",
    "BackupReport",
    "Erasure",
    "FileSpace",
    "KeyProgress",
    "KeyStatus",
    "MigrateReport",
    "PruneReport",
    "Resealing",
    "TenantSummary",
    "ToEncrypt",
    "VerifyReport",
    "all_runs",
    "backup_store",
    "check_backup_source",
    "check_tenant",
    "encrypt_store",
    "erase_tenant",
    "key_status",
    "migrate_store",
    "prune_store",
    "queue_states",
    "rekey_store",
    "scheme_of",
    "split_schema",
    "tenant_held",
    "tenant_summaries",
    "tenants_of",
    "verify_store",
]


@dataclass
class MigrateReport:
    """What one ``migrate_store`` pass found and did."""

    runs: int = 0  # runs in the store
    behind: int = 0  # runs whose head was older than the chain's current version
    migrated: int = 0
    failures: list[tuple[str, int, SafepointError]] = field(default_factory=list)
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return not self.failures


def queue_states(store: Store, runs: Iterable[RunInfo]) -> dict[str, QueueState]:
    """Each readable run's place with the workers (queued, who holds it), by run id: one read per
    run, for a page of a listing (``safepoint runs``, the inspector's runs page). A run deleted
    since it was listed, or one the store cannot read, is left out."""
    states: dict[str, QueueState] = {}
    for run in runs:
        if run.unreadable is not None:
            continue
        try:
            states[run.run_id] = store.queue_state(run.run_id)
        except NotFound:
            continue
    return states


def all_runs(store: Store, page_size: int = 500) -> Iterator[RunInfo]:
    """Every run in the store, newest first, ``page_size`` at a time."""
    cursor = None
    while True:
        page = store.runs(limit=page_size, cursor=cursor)
        yield from page
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def migrate_store(
    store: Store,
    *,
    batch_size: int = 50,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> MigrateReport:
    """Migrate every run's head to the chain's current version (``dry_run``: only load and check)."""
    chain = store.settings.migrations
    if chain is None:
        raise InvalidArgument("migrate needs the store's migration chain (open_store(..., migrations=chain))")
    if batch_size < 1:
        raise InvalidArgument(f"batch_size must be at least 1, not {batch_size!r}")
    report = MigrateReport(dry_run=dry_run)
    behind = []
    for run in all_runs(store):
        report.runs += 1
        if run.unreadable is not None:  # listed, not loadable: reported, the others still migrate
            damaged = CorruptCheckpoint(run.run_id, None, f"its run row cannot be read ({run.unreadable})")
            report.failures.append((run.run_id, -1, damaged))
        elif run.schema_version != chain.current:
            behind.append(run.run_id)
    report.behind = len(behind)
    for start in range(0, len(behind), batch_size):
        batch = behind[start : start + batch_size]
        if dry_run:
            for run_id in batch:
                try:
                    store.load(run_id)
                    report.migrated += 1
                except SafepointError as exc:
                    report.failures.append((run_id, -1, exc))
        else:
            result = store.migrate_runs(batch)
            report.migrated += len(result.rewritten)
            report.failures.extend(result.failed)
        if progress is not None:
            progress(min(start + batch_size, len(behind)), len(behind))
    return report


@dataclass
class PruneReport:
    """What retention did across the store."""

    runs: int = 0
    checkpoints_pruned: int = 0
    rows_deleted: int = 0
    runs_deleted: list[str] = field(default_factory=list)
    dry_run: bool = False
    # Stored bytes of the rows and headers removed (``PruneResult.bytes_deleted``).
    bytes_deleted: int = 0

    def add(self, result: PruneResult) -> None:
        self.checkpoints_pruned += len(result.pruned_steps)
        self.rows_deleted += result.rows_deleted
        self.bytes_deleted += result.bytes_deleted
        if result.run_deleted:
            self.runs_deleted.append(result.run_id)


def prune_store(
    store: Store,
    policy: Retention | None = None,
    *,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> PruneReport:
    """Apply retention to every run: each run's own policy, else ``policy``, else the store's."""
    if policy is not None and not isinstance(policy, Retention):
        raise InvalidArgument(f"policy must be a safepoint.Retention, not {type(policy).__name__}")
    report = PruneReport(dry_run=dry_run)
    # A run whose row cannot be read is left as it is, for inspection (docs/operations.md).
    run_ids = [run.run_id for run in all_runs(store) if run.unreadable is None]
    report.runs = len(run_ids)
    for done, run_id in enumerate(run_ids, 1):
        report.add(store.prune_run(run_id, policy, dry_run=dry_run))
        if progress is not None:
            progress(done, len(run_ids))
    return report
