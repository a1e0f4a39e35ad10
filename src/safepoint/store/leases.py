"""Queue and lease operations: enqueue, claim, heartbeat, release (generators of named queries).

A claim is one statement per dialect (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL; SQLite's single writer needs none) and bumps the run's lease
epoch; every later call under the lease — and every save made with it
(``ops.save``) — is checked against that epoch. A claim also counts an
attempt and skips a run whose ``retry_at`` (set by a failed attempt's
release) has not come; ``requeue`` gives a run a clean slate.
"""

from __future__ import annotations

from typing import Literal

from safepoint.errors import LeaseLost, NotFound
from safepoint.model import Lease, Status, from_micros

from .ops import Op, Query, lease_detail


def enqueue(run_id: str, now: int) -> Op[None]:
    """Queue the run for workers (idempotent; keeps its place if already queued)."""
    rows = yield Query("enqueue", {"run_id": run_id, "now": now})
    if not rows:
        raise NotFound(run_id)


def claim(worker_id: str, duration: float, now: int) -> Op[Lease | None]:
    """Take one queued run whose lease is free or expired; None when there is none."""
    expires = now + int(duration * 1_000_000)
    rows = yield Query("claim", {"worker_id": worker_id, "now": now, "expires_at": expires})
    if not rows:
        return None
    run_id, epoch, expires_at, attempts = rows[0]
    return Lease(run_id, worker_id, epoch, from_micros(expires_at), duration, attempts)


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
    return Lease(
        lease.run_id, lease.worker_id, lease.epoch, from_micros(rows[0][0]), duration, lease.attempts
    )


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


def next_claimable(now: int) -> Op[int | None]:
    """Microseconds until the earliest queued run can be claimed (0: now); None if none is queued."""
    rows = yield Query("next_claimable", {})
    at = rows[0][0] if rows else None
    return None if at is None else max(0, at - now)


def _raise_lease_lost(lease: Lease) -> Op[None]:
    rows = yield Query("lease_state", {"run_id": lease.run_id})
    if not rows:
        raise NotFound(lease.run_id)
    owner, epoch = rows[0]
    raise LeaseLost(lease.run_id, lease.epoch, lease_detail(lease, owner, epoch))
