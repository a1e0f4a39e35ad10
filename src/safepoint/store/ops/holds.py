"""Holds: one named run's lease taken outside the queue, and given back (generators of named queries).

A worker gets its lease by ``claim``, which picks the oldest queued run. An
exclusive ``Run`` (``Run.open`` and the other entries that can take an
action) needs the lease on the run it names, queued or not: ``hold_run``.
The lease is the same lease: a claim skips a held run as it skips any live
lease, a save without a lease is refused while it lives, a save under it
is fenced (``saving.save``: owner and epoch), ``heartbeat`` renews it, and
``revoke_lease`` and ``cancel`` fence its holder off as they do a worker.

Two differences from a claim: the epoch stays (it counts workers' claims;
``QueueState.served_by_workers`` reads it), so a hold is fenced by its owner
id, which no other live writer shares (``safepoint.harness`` makes it
host:pid:process start time plus a serial per ``Run``); and the queue,
attempts and ``retry_at`` are left as they were, both at the hold and at its
release (``release_hold``), so a run that workers serve stays theirs.
"""

from __future__ import annotations

from safepoint.errors import LeaseLost, NotFound, RunHeld
from safepoint.records import Lease, from_micros
from safepoint.store.query import Op, Query

from .saving import lease_detail

# A hold refused because the run is held, then found free when the holder is read
# (released in between, on PostgreSQL where the read is a transaction of its own):
# tried again at once, this many times in all.
_TRIES = 3


def hold_run(run_id: str, owner: str, duration: float, now: int, take_from: str | None = None) -> Op[Lease]:
    """Take the run's lease for ``owner`` if no live lease is on it, or if ``take_from`` holds it.

    ``RunHeld`` (with the holder and its expiry) while another owner's lease
    lives; ``NotFound`` if there is no such run.
    """
    expires = now + int(duration * 1_000_000)
    params = {"run_id": run_id, "owner": owner, "now": now, "expires_at": expires, "take_from": take_from}
    for _ in range(_TRIES):
        rows = yield Query("hold_run", params)
        if rows:
            return Lease(run_id, owner, rows[0].epoch, from_micros(rows[0].expires_at), duration, 0)
        state = yield Query("queue_state", {"run_id": run_id})
        if not state:
            raise NotFound(run_id)
        holder, until = state[0].owner, state[0].expires_at
        if holder is not None and until is not None and until > now and holder != take_from:
            raise RunHeld(run_id, from_micros(until), holder)
    raise RunHeld(run_id, from_micros(now), None)  # let go and taken back, again and again: busy


def release_hold(lease: Lease) -> Op[None]:
    """Give the hold back, leaving the queue, the status and the attempts as they are;
    ``LeaseLost`` if it is no longer the run's lease."""
    params = {"run_id": lease.run_id, "owner": lease.worker_id, "epoch": lease.epoch}
    if (yield Query("release_hold", params)):
        return
    rows = yield Query("lease_state", {"run_id": lease.run_id})
    if not rows:
        raise LeaseLost(lease.run_id, lease.epoch, "the run was deleted")
    raise LeaseLost(lease.run_id, lease.epoch, lease_detail(lease, rows[0].owner, rows[0].epoch))
