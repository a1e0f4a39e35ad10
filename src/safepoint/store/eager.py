"""Eager migration: rewrite every run's latest checkpoint at the current schema_version.

``safepoint migrate`` runs this. It lists the runs whose head is older than
the store's migration chain, and migrates them in batches, one transaction
per batch (``Store.migrate_runs``). It is resumable by construction: a rerun
lists only the runs still behind, so an interrupted migration simply picks up
where it stopped. Concurrent saves keep working — each batch holds the write
lock only for its own transaction, and a worker whose checkpoint was rewritten
under it re-plans its next save against the new head.

History checkpoints are not rewritten: they are migrated on read, which the
store does for every load anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from safepoint.errors import InvalidArgument, SafepointError
from safepoint.records import RunInfo

from .facade import Store


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


def all_runs(store: Store, page_size: int = 500) -> Iterator[RunInfo]:
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
    chain = store.pipeline.migrations
    if chain is None:
        raise InvalidArgument("migrate needs the store's migration chain (open_store(..., migrations=chain))")
    if batch_size < 1:
        raise InvalidArgument(f"batch_size must be at least 1, not {batch_size!r}")
    report = MigrateReport(dry_run=dry_run)
    behind = []
    for run in all_runs(store):
        report.runs += 1
        if run.schema_version != chain.current:
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
