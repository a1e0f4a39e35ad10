"""Retention and garbage collection over a whole store: what ``safepoint gc`` runs.

``prune_store`` applies retention run by run (one transaction each, so it
never holds a lock for long and is safe to interrupt); ``Store.collect_garbage``
then deletes the blobs nothing references any more. Both report what they did,
or would do with ``dry_run``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from safepoint.errors import InvalidArgument
from safepoint.records import Retention

from .eager import all_runs
from .facade import Store
from .maintenance import PruneResult


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
    run_ids = [run.run_id for run in all_runs(store)]
    report.runs = len(run_ids)
    for done, run_id in enumerate(run_ids, 1):
        report.add(store.prune_run(run_id, policy, dry_run=dry_run))
        if progress is not None:
            progress(done, len(run_ids))
    return report
