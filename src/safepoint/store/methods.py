"""The call table: every public store method, written once, for ``Store`` and ``AsyncStore`` alike.

Each entry is the method as users see it — its signature and docstring —
with, above it, the span it is observed as (``traced.Spec``: name, the
parameters that give its attributes, what its result adds), and in its body
the ``Call`` it builds (``calls.py``). ``Store`` runs that call by blocking
on its driver, ``AsyncStore`` by awaiting it (``twins.py``); neither class
lists the methods again. Adding a method is one entry here, over its
operation and the operation's named queries in each dialect's SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, Protocol

from safepoint.model import Checkpoint, CheckpointInfo, Lease, Page, Retention, RunInfo, Status

from . import arguments, calls, leases, listing, ops, retention
from .calls import reads, writes
from .collect import FileSpace, GcResult
from .leases import Cancelled, QueueState
from .pipeline import Pipeline, ResolveSecrets
from .retention import PruneResult
from .rewrite import Rewritten
from .serialize import check_id
from .traced import (
    claimed,
    collected,
    counted,
    forked,
    listed,
    loaded,
    migrated,
    of_claim,
    of_gc,
    of_lease,
    of_migrate,
    of_release,
    of_run,
    of_save,
    pruned,
)
from .twins import Returns, method


class _Backend(Protocol):
    dialect: str


class StoreMethods:
    """The methods ``Store`` and ``AsyncStore`` share, and what their entries read of the store."""

    pipeline: Pipeline
    _driver: _Backend

    @property
    def schema_version(self) -> int:
        """The checkpoint version this store writes and reads up to: the migration
        chain's current version, or ``open_store(schema_version=…)``, default 1.
        A new run starts at it; a newer checkpoint is ``SchemaTooNew``."""
        return self.pipeline.schema_version

    @method("safepoint.save", ("checkpoint", "lease"), of_save)
    def save(self, checkpoint: Checkpoint, *, lease: Lease | None = None) -> Returns[CheckpointInfo]:
        """Store ``checkpoint`` as the next step of its run, atomically and durably.

        Only the next step is accepted: step 0 for a new run, head + 1 for an
        existing one; anything else raises ``Conflict`` and writes nothing. A
        value that is not JSON data raises ``NotJSONCompatible`` naming its path,
        before any write. On success the checkpoint object records what was
        stored (``created_at``, ``digest``), so saving it again as the next step
        writes only the messages added since.

        With ``lease`` (from ``claim``), the save is accepted only while that
        lease's epoch is still the run's current one — checked in the same
        transaction — and raises ``LeaseLost`` otherwise, changing nothing.

        Every field passes the store's scrubber first (registered secrets,
        token rules, opt-in PII); the returned info's ``scrub_report`` (also
        set on the checkpoint) counts what was replaced, by rule and path.
        Under the ``raise`` policy a finding refuses the save (``SecretLeak``).
        Without a lease, a run another worker holds a live lease on is a
        ``Conflict``.
        """
        save_op = getattr(self._driver, "save_op", None)  # the dialect's own save, if any
        return calls.save(checkpoint, lease, self.pipeline, save_op)

    @method("safepoint.load", ("run_id", "step"), of_run, done=loaded)
    def load(
        self,
        run_id: str,
        step: int | None = None,
        *,
        resolve_secrets: ResolveSecrets = False,
        migrate: bool = True,
        fetch_blobs: bool = True,
    ) -> Returns[Checkpoint]:
        """The run's latest checkpoint, or the one at ``step``, verified.

        What comes back is what was stored: secrets the scrubber replaced are
        references (``{"$secret": "NAME"}``) and markers (``[SECRET:NAME]``).
        With ``resolve_secrets`` — ``True`` for the store's registered
        ``Secrets``, or another ``Secrets`` or a ``name -> value`` callable (a
        vault lookup) — they are replaced by the values, in memory only;
        ``UnknownSecret`` names one the resolver lacks.

        With a migration chain (``open_store(url, migrations=chain)``) the
        checkpoint is run forward to the chain's current ``schema_version``;
        the stored rows are never changed by a load. ``migrate=False`` returns
        it as stored. ``SchemaTooNew`` when it was written by newer code;
        ``MigrationError`` (naming run, step and versions) when a migration fails.

        Raises ``NotFound`` (also a ``LookupError``) when the run or step does
        not exist and ``CorruptCheckpoint`` when stored rows fail the digest.
        Always two queries, however long the run.
        """
        return calls.load(
            run_id,
            step,
            self.pipeline,
            resolve_secrets=resolve_secrets,
            migrate=migrate,
            fetch_blobs=fetch_blobs,
        )

    @method("safepoint.migrate", ("run_ids",), of_migrate, done=migrated)
    def migrate_runs(self, run_ids: list[str]) -> Returns[Rewritten]:
        """Eagerly migrate these runs' latest checkpoints, in one transaction.

        Each head checkpoint is rewritten in place at the chain's current
        ``schema_version`` (messages the migration changed are appended as a
        new range; older checkpoints keep theirs and are migrated on read).
        Runs already current are left alone; a run whose migration fails is
        left unchanged and reported. ``safepoint migrate`` calls this in batches.
        """
        return calls.migrate_runs(run_ids, self.pipeline)

    @method("safepoint.fetch_blob")
    def fetch_blob(self, ref: Any) -> Returns[str | bytes]:
        """The value a blob reference stands for (from ``load(..., fetch_blobs=False)``).

        ``ref`` is the ``{"$blob": {…}}`` dict found in the checkpoint, or a
        ``BlobRef``. Text comes back as ``str``; the bytes are verified against
        the digest (``BlobCorrupt`` if altered, ``BlobNotFound`` if missing).
        """
        return calls.fetch_blob(ref, self.pipeline)

    @method("safepoint.set_retention", ("run_id",), of_run)
    def set_retention(self, run_id: str, policy: Retention | None) -> Returns[None]:
        """Give one run its own retention policy (``None``: back to the store's)."""
        return writes(retention.set_retention(check_id(run_id), arguments.policy(policy)))

    @method("safepoint.prune", ("run_id",), of_run, done=pruned)
    def prune_run(
        self, run_id: str, policy: Retention | None = None, *, dry_run: bool = False
    ) -> Returns[PruneResult]:
        """Apply retention to one run in one transaction: the run's own policy, else
        ``policy``, else the store's. Kept checkpoints all still load exactly.
        (``safepoint gc`` and ``prune_store`` call this for every run.)"""
        return calls.prune_run(run_id, policy, self.pipeline, dry_run)

    @method("safepoint.gc", ("dry_run",), of_gc, done=collected)
    def collect_garbage(self, *, grace: float | timedelta = 0, dry_run: bool = False) -> Returns[GcResult]:
        """Delete blobs no stored row references (and older than ``grace``).

        Safe while saves run: it holds the blob guard that saves referencing
        blobs hold in their transaction until commit, and a save re-checks
        there the blobs it uploaded before (putting back any collected since).
        On SQLite it then gives the file's free pages back (``result.database``:
        the file's size before and after); a file created without incremental
        auto-vacuum keeps them until one ``vacuum()``. A dry run reads only.
        """
        return calls.collect_garbage(self.pipeline, grace, dry_run)

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

    @method("safepoint.history", ("run_id",), of_run, done=counted("safepoint.checkpoints"))
    def history(self, run_id: str) -> Returns[list[CheckpointInfo]]:
        """Every checkpoint of the run, oldest first (headers only, no messages)."""
        return calls.history(run_id)

    @method("safepoint.run", ("run_id",), of_run)
    def run(self, run_id: str) -> Returns[RunInfo]:
        """The run's summary: status, head step, labels, counters, timestamps."""
        return reads(listing.run_info(check_id(run_id)))

    @method("safepoint.runs", done=listed)
    def runs(
        self,
        *,
        status: Status | str | Iterable[Status | str] | None = None,
        labels: dict[str, str] | None = None,
        updated_since: datetime | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Returns[Page[RunInfo]]:
        """Runs, newest first, filtered by status (one or several), labels (all
        must match) and last update; pass ``page.next_cursor`` back as
        ``cursor`` for the next page. ``limit`` is 1 to 10,000; a bad status,
        limit or cursor raises ``InvalidArgument``."""
        return calls.runs(
            status=status, labels=labels, updated_since=updated_since, limit=limit, cursor=cursor
        )

    @method("safepoint.fork", ("run_id", "step"), of_run, done=forked)
    def fork(
        self,
        run_id: str,
        step: int | None = None,
        *,
        new_run_id: str | None = None,
        labels: dict[str, str] | None = None,
    ) -> Returns[Checkpoint]:
        """Start a new run from ``run_id``'s checkpoint at ``step`` (default: latest).

        The new run's history starts with a copy of that checkpoint, at the
        same step number, with ``parent`` recording where it came from; save
        ``fork.next()`` to continue it. Returns the new run's checkpoint.
        """
        return calls.fork(run_id, step, new_run_id, labels, self.pipeline)

    @method("safepoint.delete", ("run_id",), of_run)
    def delete_run(self, run_id: str) -> Returns[None]:
        """Delete the run: every checkpoint, its messages, the run row with its queue
        entry and lease, in one transaction; ``NotFound`` if absent.

        A worker holding the lease is fenced off (its next save, heartbeat or
        release raises ``LeaseLost``). Blobs only this run referenced stay
        until ``collect_garbage`` (``safepoint gc``). The id may be used again.
        """
        return writes(ops.delete_run(check_id(run_id)))

    @method("safepoint.enqueue", ("run_id",), of_run)
    def enqueue(self, run_id: str) -> Returns[None]:
        """Queue the run for workers to ``claim`` (idempotent); ``NotFound`` if absent."""
        return writes(leases.enqueue(check_id(run_id), calls.now_micros()))

    @method("safepoint.requeue")
    def requeue(self, run_id: str) -> Returns[None]:
        """Put the run back in the queue with its attempts reset; ``NotFound`` if absent.

        For a run a ``Worker`` quarantined (status ``failed`` after
        ``max_attempts``, its last error in ``run(run_id).last_error``):
        it becomes ``running`` and claimable again. Any other run is queued
        as ``enqueue`` would, its attempts and ``retry_at`` cleared. A live
        lease on the run is left alone.
        """
        return writes(leases.requeue(check_id(run_id), calls.now_micros()))

    @method("safepoint.cancel")
    def cancel(self, run_id: str) -> Returns[Cancelled]:
        """Stop the run for good: status ``cancelled``, out of the queue, its lease holder fenced off.

        A worker holding a live lease is fenced: its next save, heartbeat or
        release raises ``LeaseLost`` and changes nothing. The cancellation is
        saved as one new checkpoint (the head's next step, status
        ``cancelled``, nothing else changed), so it shows in ``history``, a
        writer without a lease meets ``Conflict`` at its next save, and
        ``Run.resume`` comes back inactive. A head that cannot be loaded
        (corrupt) is cancelled on the run row alone. Cancelling a cancelled
        run changes nothing more; a ``done`` run raises ``RunStatusError``;
        ``NotFound`` if absent. Returns what was done (``leases.Cancelled``).
        """
        return writes(leases.cancel(check_id(run_id), self.pipeline.prepare_save, calls.now_micros()))

    @method("safepoint.hidden_steps")
    def hidden_steps(self, run_id: str) -> Returns[list[int]]:
        """Steps of the run whose rows are marked pruned yet still hold a checkpoint —
        only tampering makes one, and it hides that checkpoint from ``history``
        and loads (``safepoint verify`` reports them); ``NotFound`` if absent."""
        return reads(retention.hidden_steps(check_id(run_id)))

    @method("safepoint.queue_depth")
    def queue_depth(self) -> Returns[int]:
        """How many queued runs a claim could take now (free or expired lease,
        ``retry_at`` come): the backlog a fleet of workers faces."""
        return reads(leases.queue_depth(calls.now_micros()))

    @method("safepoint.queue_state")
    def queue_state(self, run_id: str) -> Returns[QueueState]:
        """Where the run stands with the workers: queued or not, the lease's holder,
        epoch and expiry (``leases.QueueState``); ``NotFound`` if absent."""
        return reads(leases.queue_state(check_id(run_id)))

    @method("safepoint.revoke_lease")
    def revoke_lease(self, run_id: str) -> Returns[QueueState]:
        """Fence off the worker holding the run's lease and take the run out of the queue.

        The holder's next save, heartbeat or release raises ``LeaseLost``. Out
        of the queue too, so no worker claims the run while the caller works
        on it: ``enqueue`` (or ``requeue``) hands it back. Returns the state
        as it was before (``state.leased()``: whether a live lease was
        revoked); ``NotFound`` if absent.
        """
        return writes(leases.revoke_lease(check_id(run_id)))

    @method("safepoint.claim", ("worker_id",), of_claim, done=claimed)
    def claim(self, worker_id: str, *, lease: float | timedelta = 30.0) -> Returns[Lease | None]:
        """Atomically take one queued run whose lease is free or expired.

        Returns a ``Lease`` whose ``epoch`` is higher than any earlier claim of
        the run, or None when nothing is claimable. Save under it with
        ``save(cp, lease=...)``; keep it alive with ``heartbeat``. ``lease`` is
        a positive duration of at most 365 days (seconds or a ``timedelta``).
        """
        return calls.claim(worker_id, lease)

    @method("safepoint.heartbeat", ("lease",), of_lease)
    def heartbeat(self, lease: Lease, *, extend: float | timedelta | None = None) -> Returns[Lease]:
        """Extend the lease (by its own duration unless ``extend``); ``LeaseLost`` if fenced off."""
        return calls.heartbeat(lease, extend)

    @method("safepoint.release", ("lease", "status", "requeue"), of_release)
    def release(
        self, lease: Lease, *, status: Status | str | None = None, requeue: bool = False
    ) -> Returns[None]:
        """Give the run back. ``requeue`` keeps it queued for another worker;
        ``status`` sets the run's status (its checkpoints keep theirs).
        ``LeaseLost`` if the lease is no longer current."""
        return calls.release(lease, status, requeue)
