"""Queue and lease operations: enqueue, claim, heartbeat, release (generators of named queries).

A claim is one statement per dialect (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL; SQLite's single writer needs none) and bumps the run's lease
epoch; every later call under the lease — and every save made with it
(``saving.save``) — is checked against that epoch. A claim also counts an
attempt and skips a run whose ``retry_at`` (set by a failed attempt's
release) has not come, and a run saved by newer code than the claimer's
(its head's ``schema_version`` above the claimer's ``max_version``): the
claimer could not load it, so it is left queued for newer code, untouched.
``requeue`` gives a run a clean slate.

For operators: ``queue_state`` reads where a run stands with the workers,
``revoke_lease`` fences off the worker holding it (its next save, heartbeat or
release raises ``LeaseLost``), and ``cancel`` does that and stops the run for
good, as a new checkpoint with status ``cancelled``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from safepoint.errors import LeaseLost, NotFound, RunStatusError, SafepointError
from safepoint.model import Checkpoint, Status
from safepoint.records import Lease, from_micros
from safepoint.store.query import UNSUPPORTED, Op, Query, Row, SaveInput

from .loading import load_typed
from .saving import lease_detail, save


def enqueue(run_id: str, now: int) -> Op[None]:
    """Queue the run for workers (idempotent; keeps its place if already queued)."""
    rows = yield Query("enqueue", {"run_id": run_id, "now": now})
    if not rows:
        raise NotFound(run_id)


def claim(
    worker_id: str, duration: float, now: int, max_version: int, held_limit: int | None = None
) -> Op[Lease | None]:
    """Take one queued run whose lease is free or expired and whose head is at most
    ``max_version``; None when there is none — or, with ``held_limit``, when the store's
    tenant already holds that many live leases (claims under a limit take turns, so two
    never both take the last place: SQLite's write lock, PostgreSQL's per-tenant lock)."""
    expires = now + int(duration * 1_000_000)
    params = {
        "worker_id": worker_id,
        "now": now,
        "expires_at": expires,
        "max_version": max_version,
        "held_limit": held_limit,
    }
    rows = yield Query("claim", params)
    if not rows:
        return None
    row = rows[0]
    expires_at = from_micros(row.expires_at)
    return Lease(row.run_id, worker_id, row.epoch, expires_at, duration, row.attempts, _status(row.status))


def claimable_tenants(tenants: list[str], now: int, max_version: int) -> Op[list[str] | None]:
    """Which of ``tenants`` have a run a claim could take now, in one statement; None from a
    dialect without it (SQLite: a file per tenant, each asked on its own)."""
    params = {"tenants": json.dumps(tenants), "now": now, "max_version": max_version}
    rows = yield Query("claimable_tenants", params, optional=True)
    if rows is UNSUPPORTED:
        return None
    return [row.tenant for row in rows]


def _status(value: Any) -> Status | None:
    """A run row's status; None for one no ``Status`` names (a hand-edited row): the
    claim still succeeds, and whoever needs the status reads the row."""
    try:
        return Status(value)
    except ValueError:
        return None


def heartbeat(lease: Lease, duration: float, now: int) -> Op[Lease]:
    """Extend the lease from now; LeaseLost if it is no longer current."""
    expires = now + int(duration * 1_000_000)
    params = {
        "run_id": lease.run_id,
        "worker_id": lease.worker_id,
        "epoch": lease.epoch,
        "expires_at": expires,
    }
    rows = yield Query("heartbeat", params)
    if not rows:
        yield from _raise_lease_lost(lease)
    return replace(lease, expires_at=from_micros(rows[0].expires_at), duration=duration)


Attempts = Literal["keep", "reset", "uncount"]


def release(
    lease: Lease,
    status: Status | None,
    requeue: bool,
    now: int,
    *,
    attempts: Attempts = "keep",
    retry_at: int | None = None,
    error: str | None = None,
) -> Op[None]:
    """Give the run back; with ``requeue`` it stays queued for the next worker.

    ``attempts``: keep the count, ``reset`` it (a clean outcome), or
    ``uncount`` this claim (not the run's fault). ``retry_at`` (microseconds)
    keeps the run from being claimed before then; ``error`` is recorded as
    its last error (already scrubbed and truncated by the caller).
    """
    rows = yield Query(
        "release",
        {
            "run_id": lease.run_id,
            "worker_id": lease.worker_id,
            "epoch": lease.epoch,
            "status": None if status is None else status.value,
            "requeue": requeue,
            "now": now,
            "attempts": attempts,
            "retry_at": retry_at,
            "error": error,
        },
    )
    if not rows:
        yield from _raise_lease_lost(lease)


def requeue(run_id: str, now: int) -> Op[None]:
    """Queue the run again with its attempts reset (a quarantined run becomes running)."""
    rows = yield Query("requeue", {"run_id": run_id, "now": now})
    if not rows:
        raise NotFound(run_id)


def queue_depth(now: int) -> Op[int]:
    """How many queued runs a claim could take now."""
    rows = yield Query("queue_depth", {"now": now})
    return int(rows[0].depth) if rows else 0


def next_claimable(now: int, max_version: int) -> Op[int | None]:
    """Microseconds until the earliest queued run a claim with ``max_version`` could take
    can be claimed (0: now); None if none is queued."""
    rows = yield Query("next_claimable", {"max_version": max_version})
    at = rows[0].at if rows else None
    return None if at is None else max(0, at - now)


def queued_too_new(max_version: int) -> Op[int]:
    """How many queued runs are newer than ``max_version``: a claim with it leaves them alone."""
    rows = yield Query("queued_too_new", {"max_version": max_version})
    return int(rows[0].runs) if rows else 0


def _raise_lease_lost(lease: Lease) -> Op[None]:
    rows = yield Query("lease_state", {"run_id": lease.run_id})
    if not rows:  # deleted under its holder: the lease is lost as surely as to a new claim
        raise LeaseLost(lease.run_id, lease.epoch, "the run was deleted")
    raise LeaseLost(lease.run_id, lease.epoch, lease_detail(lease, rows[0].owner, rows[0].epoch))


@dataclass(frozen=True, slots=True)
class QueueState:
    """Where a run stands with the workers (``Store.queue_state``).

    ``epoch`` counts the claims of the run so far: 0 means no worker ever took
    it. ``owner`` and ``expires_at`` are the lease's, None when the run is
    not leased; a lease whose ``expires_at`` has passed no longer protects the
    run (any worker may claim it), see ``leased``.
    """

    run_id: str
    queued: bool
    owner: str | None
    epoch: int
    expires_at: datetime | None

    def leased(self, now: datetime | None = None) -> bool:
        """Whether a worker holds a live lease on the run (at ``now``; default: the current time)."""
        if self.owner is None or self.expires_at is None:
            return False
        return self.expires_at > (now if now is not None else datetime.now(self.expires_at.tzinfo))

    def holder(self, now: datetime | None = None) -> str | None:
        """The owner of a live lease (a worker's id, or an exclusive ``Run``'s), else None."""
        return self.owner if self.leased(now) else None

    def waiting(self, now: datetime | None = None) -> bool:
        """Whether the run waits in the queue for a worker: queued, and no live lease holds it.

        Its run row says running meanwhile; listings show such a run as queued."""
        return self.queued and not self.leased(now)

    @property
    def served_by_workers(self) -> bool:
        """Whether workers ever claimed the run (so a run made runnable again belongs in the queue)."""
        return self.epoch > 0


@dataclass(frozen=True, slots=True)
class Cancelled:
    """What ``Store.cancel`` did.

    ``step`` is the checkpoint saved with status ``cancelled``, or None when
    none was (the head already said cancelled, or it could not be loaded: then
    only the run row says so). ``fenced`` is True when a worker held a live
    lease: its next save, heartbeat or release raises ``LeaseLost``.
    """

    run_id: str
    step: int | None
    fenced: bool


def _queue_state(run_id: str, row: Row) -> QueueState:
    expires = row.expires_at
    return QueueState(
        run_id, bool(row.queued), row.owner, row.epoch, None if expires is None else from_micros(expires)
    )


def queue_state(run_id: str) -> Op[QueueState]:
    """The run's place in the queue and its lease."""
    rows = yield Query("queue_state", {"run_id": run_id})
    if not rows:
        raise NotFound(run_id)
    return _queue_state(run_id, rows[0])


def _locked_state(run_id: str) -> Op[tuple[QueueState, str]]:
    """The queue state and the run row's status, the row locked until commit (PostgreSQL):
    a save of the run in flight finishes first, and one that comes later waits and then
    fails its lease check."""
    rows = yield Query("queue_state_for_update", {"run_id": run_id})
    if not rows:
        raise NotFound(run_id)
    return _queue_state(run_id, rows[0]), rows[0].status


def revoke_lease(run_id: str) -> Op[QueueState]:
    """Fence off the lease holder and take the run out of the queue; the state as it was before."""
    before, _status = yield from _locked_state(run_id)
    yield Query("revoke_lease", {"run_id": run_id})
    return before


def cancel(run_id: str, prepare: Callable[[Checkpoint], SaveInput[Any]], now: int) -> Op[Cancelled]:
    """Stop the run for good: fence its lease holder, dequeue it, and save a ``cancelled`` checkpoint.

    The checkpoint is the head's next step with only its status changed, so
    the cancellation is in the history, a writer without a lease that saves
    next meets a ``Conflict``, and a resumed ``Run`` comes back inactive. A
    head that cannot be loaded or stored again (corrupt, saved by newer code)
    still gets cancelled, on the run row alone. ``RunStatusError`` for a run
    that is done (raised before anything is written: the transaction rolls back).
    """
    before, row_status = yield from _locked_state(run_id)
    if row_status == Status.DONE.value:
        raise RunStatusError(run_id, row_status, "it finished: there is nothing to cancel")
    fenced = before.leased(from_micros(now))
    yield Query("cancel_run", {"run_id": run_id})
    try:
        head, *_ = yield from load_typed(run_id, None)
    except SafepointError:
        return Cancelled(run_id, None, fenced)  # unloadable head: the run row alone says cancelled
    if head.status is Status.DONE:
        raise RunStatusError(run_id, head.status.value, "it finished: there is nothing to cancel")
    if head.status is Status.CANCELLED:
        return Cancelled(run_id, None, fenced)
    cancelled = head.next()
    cancelled.status = Status.CANCELLED
    try:
        prepared = prepare(cancelled)
        plan = prepared.plan(head.stored_view, cancelled.messages)
    except SafepointError:
        return Cancelled(run_id, None, fenced)
    yield from save(cancelled, prepared, head.stored_view, plan, now=now)
    return Cancelled(run_id, cancelled.step, fenced)
