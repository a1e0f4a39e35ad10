"""Conformance: claims, leases and fencing (DESIGN invariant 7), for every store.

Mixed into ``StoreConformance``; uses its ``store`` and ``reopen`` fixtures.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from safepoint.errors import Conflict, InvalidArgument, LeaseLost, NotFound
from safepoint.model import Checkpoint, Status
from safepoint.store import Store

from .runs import grow


class LeaseConformance:
    """Claims take queued runs once; a stale lease holder is fenced off."""

    def test_claim_takes_queued_runs_only(self, store: Store) -> None:
        """claim returns None with nothing queued, and takes queued runs oldest first."""
        assert store.claim("w1") is None
        with pytest.raises(NotFound):
            store.enqueue("absent")
        for name in ("q1", "q2"):
            grow(store, name, 1)
            store.enqueue(name)
            store.enqueue(name)  # idempotent: keeps its place
        first = store.claim("w1", lease=30)
        second = store.claim("w2", lease=30)
        assert first is not None
        assert second is not None
        assert (first.run_id, second.run_id) == ("q1", "q2")
        assert first.epoch == 1
        assert store.claim("w3") is None  # both leases are live

    def test_stale_owner_is_fenced_off(self, store: Store) -> None:
        """Once another worker claims an expired lease, a stale owner's save is LeaseLost (no change)."""
        cp = grow(store, "fenced", 1)
        store.enqueue("fenced")
        old = store.claim("w-old", lease=0.05)
        assert old is not None
        time.sleep(0.1)
        new = store.claim("w-new", lease=30)
        assert new is not None
        assert (new.run_id, new.epoch) == ("fenced", old.epoch + 1)
        stale = cp.next()
        stale.messages.append({"role": "user", "content": "from the stale owner"})
        with pytest.raises(LeaseLost) as caught:
            store.save(stale, lease=old)
        assert "another worker holds epoch" in str(caught.value)
        assert "w-new" not in str(caught.value)  # worker ids are never quoted
        with pytest.raises(LeaseLost):
            store.heartbeat(old)
        with pytest.raises(LeaseLost):
            store.release(old)
        assert store.load("fenced").step == 0
        fresh = store.load("fenced").next()
        fresh.messages.append({"role": "user", "content": "from the new owner"})
        store.save(fresh, lease=new)
        assert [m["content"] for m in store.load("fenced").messages][-1] == "from the new owner"

    def test_unleased_save_cannot_bypass_a_live_lease(self, store: Store) -> None:
        """A save without the lease on a run leased to a worker is a Conflict."""
        cp = grow(store, "held", 1)
        store.enqueue("held")
        lease = store.claim("w1", lease=30)
        assert lease is not None
        with pytest.raises(Conflict, match="leased by a worker"):
            store.save(cp.next())
        with pytest.raises(InvalidArgument):
            store.save(Checkpoint(run_id="other"), lease=lease)

    def test_heartbeat_and_release(self, store: Store) -> None:
        """heartbeat extends a lease; release frees the run, requeued or not, with an optional status."""
        grow(store, "hb", 1)
        store.enqueue("hb")
        lease = store.claim("w1", lease=5)
        assert lease is not None
        renewed = store.heartbeat(lease, extend=60)
        assert renewed.expires_at > lease.expires_at
        assert renewed.epoch == lease.epoch
        store.release(renewed, requeue=True)
        again = store.claim("w2", lease=5)
        assert again is not None
        assert again.epoch == lease.epoch + 1
        store.release(again, status="done")
        assert store.claim("w3") is None
        assert store.run("hb").status is Status.DONE

    def test_concurrent_claimers_never_share_a_run(self, store: Store, reopen: Callable[[], Store]) -> None:
        """Eight claimers racing over 24 queued runs: every run is claimed exactly once."""
        for n in range(24):
            grow(store, f"job-{n}", 1)
            store.enqueue(f"job-{n}")
        claimed: list[tuple[str, int]] = []
        lock = threading.Lock()

        def claimer(n: int) -> None:
            own = reopen()
            while (lease := own.claim(f"w{n}", lease=60)) is not None:
                with lock:
                    claimed.append((lease.run_id, lease.epoch))

        threads = [threading.Thread(target=claimer, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(claimed) == sorted((f"job-{n}", 1) for n in range(24))
