"""The call table, upkeep: retention, garbage collection, vacuum, eager migration (see ``methods``)."""

from __future__ import annotations

from datetime import timedelta

from safepoint.observe import store_calls
from safepoint.records import Retention, StatusOrigin
from safepoint.store import arguments, calls
from safepoint.store.calls import reads, writes
from safepoint.store.ops import listing, redacting, retention
from safepoint.store.ops.collect import FileSpace, GcResult
from safepoint.store.ops.retention import PruneResult
from safepoint.store.ops.rewrite import Rewritten
from safepoint.store.redaction import RedactionRecord
from safepoint.store.twins import Entries, Returns, method
from safepoint.store.validate import check_id


class UpkeepMethods(Entries):
    """Retention, garbage collection, vacuum and eager migration: one entry per store method."""

    @method("safepoint.migrate", ("run_ids",), store_calls.of_migrate, done=store_calls.migrated)
    def migrate_runs(self, run_ids: list[str]) -> Returns[Rewritten]:
        """Eagerly migrate these runs' latest checkpoints, in one transaction.

        Each head checkpoint is rewritten in place at the chain's current
        ``schema_version`` (messages the migration changed are appended as a
        new range; older checkpoints keep theirs and are migrated on read).
        Runs already current are left alone; a run whose migration fails is
        left unchanged and reported. ``safepoint migrate`` calls this in batches.
        """
        return calls.migrate_runs(run_ids, self.settings)

    @method("safepoint.set_retention", ("run_id",), store_calls.of_run)
    def set_retention(self, run_id: str, policy: Retention | None) -> Returns[None]:
        """Give one run its own retention policy (``None``: back to the store's)."""
        return writes(retention.set_retention(check_id(run_id), arguments.policy(policy)))

    @method("safepoint.prune", ("run_id",), store_calls.of_run, done=store_calls.pruned)
    def prune_run(
        self, run_id: str, policy: Retention | None = None, *, dry_run: bool = False
    ) -> Returns[PruneResult]:
        """Apply retention to one run in one transaction: the run's own policy, else
        ``policy``, else the store's. Kept checkpoints all still load exactly.
        (``safepoint gc`` and ``prune_store`` call this for every run.)"""
        return calls.prune_run(run_id, policy, self.settings, dry_run)

    @method("safepoint.redactions", ("run_id",), store_calls.of_run)
    def redactions(self, run_id: str) -> Returns[list[RedactionRecord]]:
        """The audit records redactions left on this run (``Store.redact``), oldest first:
        what each named and replaced, never a value; ``intact`` says a record is as written."""
        return reads(redacting.redaction_records(check_id(run_id), self.settings.sealer))

    @method("safepoint.gc", ("dry_run",), store_calls.of_gc, done=store_calls.collected)
    def collect_garbage(self, *, grace: float | timedelta = 0, dry_run: bool = False) -> Returns[GcResult]:
        """Delete blobs no stored row references (and older than ``grace``).

        Safe while saves run: it holds the blob guard that saves referencing
        blobs hold in their transaction until commit, and a save re-checks
        there the blobs it uploaded before (putting back any collected since).
        On SQLite it then gives the file's free pages back (``result.database``:
        the file's size before and after); a file created without incremental
        auto-vacuum keeps them until one ``vacuum()``. A dry run reads only.
        """
        return calls.collect_garbage(self.settings, grace, dry_run)

    @method("safepoint.vacuum")
    def vacuum(self) -> Returns[FileSpace]:
        """Rewrite a SQLite file without its free pages, and switch it to incremental auto-vacuum.

        For a file created before safepoint created stores with incremental
        auto-vacuum: after this one full ``VACUUM``, ``collect_garbage`` gives
        freed pages back to the file system itself. It needs the database to
        itself for as long as it takes (saves wait, up to their busy timeout)
        and free disk space about the size of the file. ``InvalidArgument``
        on PostgreSQL, whose autovacuum reuses freed space.
        """
        return calls.vacuum(self._driver.dialect)

    @method("safepoint.hidden_steps")
    def hidden_steps(self, run_id: str) -> Returns[list[int]]:
        """Steps of the run whose rows are marked pruned yet still hold a checkpoint —
        only tampering makes one, and it hides that checkpoint from ``history``
        and loads (``safepoint verify`` reports them); ``NotFound`` if absent."""
        return reads(retention.hidden_steps(check_id(run_id)))

    @method("safepoint.status_origin")
    def status_origin(self, run_id: str) -> Returns[StatusOrigin]:
        """What set the run row's status: its head checkpoint (a save), or a change made
        without one (release, requeue, cancel) recorded until the next save —
        ``safepoint verify`` reports a status that is neither; ``NotFound`` if absent."""
        return reads(listing.status_origin(check_id(run_id)))
