"""The call table, holds: one named run's lease outside the queue, and its release (see ``methods``)."""

from __future__ import annotations

from datetime import timedelta

from safepoint.observe import store_calls
from safepoint.records import Lease, now_micros
from safepoint.store import arguments
from safepoint.store.calls import writes
from safepoint.store.ops import holds
from safepoint.store.twins import Entries, Returns, method
from safepoint.store.validate import check_id


class HoldMethods(Entries):
    """Holds on named runs (what an exclusive ``Run`` takes): one entry per store method."""

    @method("safepoint.hold_run", ("run_id",), store_calls.of_run)
    def hold_run(
        self,
        run_id: str,
        owner: str,
        *,
        lease: float | timedelta = 30.0,
        take_from: str | None = None,
    ) -> Returns[Lease]:
        """Take the lease on the run named, outside the queue, for ``owner``: the lease an
        exclusive ``Run`` holds (``Run.open`` takes it; most callers never call this).

        Taken when no live lease is on the run, or when ``take_from`` holds it
        (a holder the caller knows is dead). Like a claim's lease it is fenced
        (save under it with ``save(cp, lease=...)``: a holder that lost it gets
        ``LeaseLost``), renewed by ``heartbeat``, skipped by ``claim`` while it
        lives, and a save without it is refused. Unlike a claim it leaves the
        queue, the attempts and the epoch as they were. ``lease`` is a
        positive duration of at most 365 days. ``RunHeld`` (its ``owner`` and
        ``until``) while another owner's lease lives; ``NotFound`` if absent.
        Give it back with ``release_hold``.
        """
        seconds = arguments.seconds(lease, "lease")
        holder = check_id(owner, "owner")
        before = None if take_from is None else check_id(take_from, "take_from")
        return writes(holds.hold_run(check_id(run_id), holder, seconds, now_micros(), before))

    @method("safepoint.release_hold", ("lease",), store_calls.of_lease)
    def release_hold(self, lease: Lease) -> Returns[None]:
        """Give back a lease ``hold_run`` took: the run keeps its place in the queue (or stays
        out of it), its status and its attempts. ``LeaseLost`` if the lease is no longer current."""
        arguments.check_lease(lease)
        return writes(holds.release_hold(lease))
