"""The call table, the work queue: enqueue, claim, heartbeat, release, revoke, cancel (see ``methods``).

A ``Worker`` is a client of these methods like any other: its claim, its
heartbeats, its release (with the attempt count, ``retry_at`` and the error
its attempt policy records) and its idle reads (``claimable_in``,
``queue_too_new``) each go through the store's own call path — span,
sealing, retries, group commit — and nothing else.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from safepoint.errors import InvalidArgument
from safepoint.model import Status
from safepoint.observe import store_calls
from safepoint.records import Lease, RunCounts, now_micros, to_micros
from safepoint.scrub import Scrubber
from safepoint.store import arguments
from safepoint.store.calls import Call, reads, writes
from safepoint.store.ops import leases, listing
from safepoint.store.ops.leases import Attempts, Cancelled, QueueState
from safepoint.store.tenants import check_tenant
from safepoint.store.twins import Entries, Returns, method
from safepoint.store.validate import check_id
from safepoint.visible import visible

ERROR_LEN = 500  # characters of a release's error kept: enough to tell causes apart
_ATTEMPTS = ("keep", "reset", "uncount")


class QueueMethods(Entries):
    """The work queue and its leases: one entry per store method."""

    @method("safepoint.enqueue", ("run_id",), store_calls.of_run)
    def enqueue(self, run_id: str) -> Returns[None]:
        """Queue the run for workers to ``claim`` (idempotent); ``NotFound`` if absent."""
        return writes(leases.enqueue(check_id(run_id), now_micros()))

    @method("safepoint.requeue")
    def requeue(self, run_id: str) -> Returns[None]:
        """Put the run back in the queue with its attempts reset; ``NotFound`` if absent.

        For a run a ``Worker`` quarantined (status ``failed`` after
        ``max_attempts``, its last error in ``run(run_id).last_error``):
        it becomes ``running`` and claimable again. Any other run is queued
        as ``enqueue`` would, its attempts and ``retry_at`` cleared. A live
        lease on the run is left alone.
        """
        return writes(leases.requeue(check_id(run_id), now_micros()))

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
        return writes(leases.cancel(check_id(run_id), self.settings.prepare_save, now_micros()))

    @method("safepoint.claim", ("worker_id",), store_calls.of_claim, done=store_calls.claimed)
    def claim(
        self, worker_id: str, *, lease: float | timedelta = 30.0, tenant_limit: int | None = None
    ) -> Returns[Lease | None]:
        """Atomically take one queued run whose lease is free or expired.

        Returns a ``Lease`` whose ``epoch`` is higher than any earlier claim of
        the run (its ``attempts`` and ``run_status`` as the claim found the
        run), or None when nothing is claimable. Save under it with
        ``save(cp, lease=...)``; keep it alive with ``heartbeat``. ``lease`` is
        a positive duration of at most 365 days (seconds or a ``timedelta``).
        A run saved by newer code (its head's ``schema_version`` above this
        store's ``schema_version``) is never claimed: it stays queued,
        untouched, for a store opened by newer code.

        ``tenant_limit``: claim nothing while the store's tenant already holds
        that many live leases, whoever holds them (docs/tenants.md, "The fair
        queue"); claims under a limit take turns per tenant.
        """
        worker = check_id(worker_id, "worker_id")
        duration = arguments.seconds(lease, "lease")
        if tenant_limit is not None and (type(tenant_limit) is not int or tenant_limit < 1):
            raise InvalidArgument("tenant_limit must be None or an int of at least 1")
        version = self.settings.schema_version
        return writes(leases.claim(worker, duration, now_micros(), version, tenant_limit))

    @method("safepoint.claimable_tenants")
    def claimable_tenants(self, tenants: list[str]) -> Returns[list[str] | None]:
        """Which of ``tenants`` have a run a claim could take now, asked in one statement
        (PostgreSQL); None where the backend keeps each tenant apart (SQLite's file per tenant),
        whose handles are then asked one by one (``safepoint.worker.FairClaims``)."""
        names = [check_tenant(name, what="each tenant") for name in tenants]
        return reads(leases.claimable_tenants(names, now_micros(), self.settings.schema_version))

    @method("safepoint.heartbeat", ("lease",), store_calls.of_lease)
    def heartbeat(self, lease: Lease, *, extend: float | timedelta | None = None) -> Returns[Lease]:
        """Extend the lease (by its own duration unless ``extend``); ``LeaseLost`` if fenced off."""
        arguments.check_lease(lease)
        duration = lease.duration if extend is None else arguments.seconds(extend, "extend")
        return writes(leases.heartbeat(lease, duration, now_micros()))

    @method("safepoint.release", ("lease", "status", "requeue"), store_calls.of_release)
    def release(
        self,
        lease: Lease,
        *,
        status: Status | str | None = None,
        requeue: bool = False,
        attempts: Attempts = "keep",
        retry_at: datetime | None = None,
        error: str | None = None,
    ) -> Returns[None]:
        """Give the run back. ``requeue`` keeps it queued for another worker;
        ``status`` sets the run's status (its checkpoints keep theirs).
        ``LeaseLost`` if the lease is no longer current.

        What a ``Worker`` records of the attempt: ``attempts`` says what
        happens to the run's count of attempts — ``"keep"`` it, ``"reset"``
        it to 0 (a clean outcome; the last error is cleared too), or
        ``"uncount"`` this claim (the attempt was not the run's fault).
        ``retry_at`` keeps the run from being claimed before then (a naive
        datetime is UTC).
        ``error`` becomes the run's ``last_error`` (``run(run_id)``):
        scrubbed by this store's scrubber as a save's text is, its control
        characters shown as escapes, cut to 500 characters (and sealed on
        an encrypted store), so no secret it quotes is stored.
        """
        arguments.check_lease(lease)
        new_status = None if status is None else arguments.status(status)
        requeue = arguments.flag(requeue, "requeue")
        if type(attempts) is not str or attempts not in _ATTEMPTS:
            raise InvalidArgument("attempts must be 'keep', 'reset' or 'uncount'")
        if retry_at is not None and not isinstance(retry_at, datetime):
            raise InvalidArgument(f"retry_at must be a datetime or None, not {type(retry_at).__name__}")
        if error is not None and attempts == "reset":
            raise InvalidArgument("attempts='reset' clears the last error: give it or an error, not both")
        op = leases.release(
            lease,
            new_status,
            requeue,
            now_micros(),
            attempts=attempts,
            retry_at=None if retry_at is None else to_micros(retry_at),
            error=None if error is None else _recorded(error, self.settings.scrubber),
        )
        return writes(op)

    @method("safepoint.claimable_in")
    def claimable_in(self) -> Returns[timedelta | None]:
        """How long until a ``claim`` could take a queued run (``timedelta(0)``: now — a free or
        expired lease, a ``retry_at`` come), or None when nothing is queued that this store's
        claims take (runs saved by newer code are left out: see ``queue_too_new``).

        A live lease counts until it expires, so a run its worker releases
        early is claimable sooner: ask again. ``Worker.run(stop_when_idle=True)``
        waits on it."""
        return Call(leases.next_claimable(now_micros(), self.settings.schema_version), False, _wait)

    @method("safepoint.queue_too_new")
    def queue_too_new(self) -> Returns[int]:
        """How many queued runs were saved by newer code (their head's ``schema_version`` above
        this store's ``schema_version``): its claims leave them alone, for a store opened by
        newer code. A ``Worker`` reports it as the gauge ``safepoint.queue.too_new``."""
        return reads(leases.queued_too_new(self.settings.schema_version))

    @method("safepoint.run_counts")
    def run_counts(self, *, soon: timedelta = timedelta(seconds=30)) -> Returns[RunCounts]:
        """Runs by status; how many are queued, leased, and leased with less than ``soon`` left."""
        now = now_micros()
        return reads(listing.run_counts(now, now + int(soon.total_seconds() * 1_000_000)))

    @method("safepoint.queue_depth")
    def queue_depth(self) -> Returns[int]:
        """How many queued runs a claim could take now (free or expired lease,
        ``retry_at`` come): the backlog a fleet of workers faces."""
        return reads(leases.queue_depth(now_micros()))

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


def _recorded(error: Any, scrubber: Scrubber | None) -> str:
    """A release's ``error`` as stored: scrubbed, its control characters escaped, cut."""
    if type(error) is not str:
        raise InvalidArgument(f"error must be a str or None, not {type(error).__name__}")
    return visible(error if scrubber is None else scrubber.scrub_text(error), max_len=ERROR_LEN)


def _wait(micros: int | None) -> timedelta | None:
    return None if micros is None else timedelta(microseconds=micros)
