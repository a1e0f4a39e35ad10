"""Queue and lease operations: enqueue, claim, heartbeat, release (generators of named queries).

A claim is one statement per dialect (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL; SQLite's single writer needs none) and bumps the run's lease
epoch; every later call under the lease — and every save made with it
(``ops.save``) — is checked against that epoch.
"""

from __future__ import annotations

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
    run_id, epoch, expires_at = rows[0]
    return Lease(run_id, worker_id, epoch, from_micros(expires_at), duration)


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
    return Lease(lease.run_id, lease.worker_id, lease.epoch, from_micros(rows[0][0]), duration)


def release(lease: Lease, status: Status | None, requeue: bool, now: int) -> Op[None]:
    """Give the run back; with ``requeue`` it stays queued for the next worker."""
    rows = yield Query(
        "release",
        {
            "run_id": lease.run_id,
            "worker_id": lease.worker_id,
            "epoch": lease.epoch,
            "status": None if status is None else status.value,
            "requeue": requeue,
            "now": now,
        },
    )
    if not rows:
        yield from _raise_lease_lost(lease)


def _raise_lease_lost(lease: Lease) -> Op[None]:
    rows = yield Query("lease_state", {"run_id": lease.run_id})
    if not rows:
        raise NotFound(lease.run_id)
    owner, epoch = rows[0]
    raise LeaseLost(lease.run_id, lease.epoch, lease_detail(lease, owner, epoch))


