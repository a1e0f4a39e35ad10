"""The call table, the work queue: enqueue, claim, heartbeat, release, revoke, cancel (see ``methods``)."""

from __future__ import annotations

from datetime import timedelta

from safepoint.model import Status
from safepoint.records import Lease, RunCounts
from safepoint.store import calls, traced
from safepoint.store.calls import reads, writes
from safepoint.store.ops import leases, listing
from safepoint.store.ops.leases import Cancelled, QueueState
from safepoint.store.twins import Entries, Returns, method
from safepoint.store.validate import check_id


class QueueMethods(Entries):
    """The work queue and its leases: one entry per store method."""

    @method("safepoint.enqueue", ("run_id",), traced.of_run)
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

    @method("safepoint.claim", ("worker_id",), traced.of_claim, done=traced.claimed)
    def claim(self, worker_id: str, *, lease: float | timedelta = 30.0) -> Returns[Lease | None]:
        """Atomically take one queued run whose lease is free or expired.

        Returns a ``Lease`` whose ``epoch`` is higher than any earlier claim of
        the run, or None when nothing is claimable. Save under it with
        ``save(cp, lease=...)``; keep it alive with ``heartbeat``. ``lease`` is
        a positive duration of at most 365 days (seconds or a ``timedelta``).
        A run saved by newer code (its head's ``schema_version`` above this
        store's ``schema_version``) is never claimed: it stays queued,
        untouched, for a store opened by newer code.
        """
        return calls.claim(worker_id, lease, self.pipeline.schema_version)

    @method("safepoint.heartbeat", ("lease",), traced.of_lease)
    def heartbeat(self, lease: Lease, *, extend: float | timedelta | None = None) -> Returns[Lease]:
        """Extend the lease (by its own duration unless ``extend``); ``LeaseLost`` if fenced off."""
        return calls.heartbeat(lease, extend)

    @method("safepoint.release", ("lease", "status", "requeue"), traced.of_release)
    def release(
        self, lease: Lease, *, status: Status | str | None = None, requeue: bool = False
    ) -> Returns[None]:
        """Give the run back. ``requeue`` keeps it queued for another worker;
        ``status`` sets the run's status (its checkpoints keep theirs).
        ``LeaseLost`` if the lease is no longer current."""
        return calls.release(lease, status, requeue)

    @method("safepoint.run_counts")
    def run_counts(self, *, soon: timedelta = timedelta(seconds=30)) -> Returns[RunCounts]:
        """Runs by status; how many are queued, leased, and leased with less than ``soon`` left."""
        now = calls.now_micros()
        return reads(listing.run_counts(now, now + int(soon.total_seconds() * 1_000_000)))

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
