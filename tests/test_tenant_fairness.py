"""The fair queue: a worker serving many tenants claims tenant by tenant, so no flood starves a trickle.

Eight real ``Worker`` loops (threads sharing one store's connections) serve a
tenant with 1,000 queued runs and one with 20, each claim in the order the
store granted it; the small tenant's last run must be claimed within the first
2 x 8 x 20 claims, and no run twice. Then the cost side: with a hundred
tenants of which one is busy, about one claim statement per claim.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from safepoint import Checkpoint, Status, Store
from safepoint.errors import InvalidArgument, InvalidURL
from safepoint.worker import Job, Worker
from safepoint.worker.fair import FairClaims

WORKERS = 8
BIG, SMALL = 1000, 20


@pytest.fixture
def pg_store() -> Iterator[Store]:
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        store = safepoint.open_store(dsn, schema=schema, min_size=0, max_size=WORKERS + 2)
        try:
            yield store
        finally:
            store.close()


def _queue(store: Store, tenant: str, count: int) -> None:
    """``count`` runs of ``tenant``, each saved and queued."""
    handle = store.for_tenant(tenant)

    def one(index: int) -> None:
        run_id = f"{tenant}-{index:05d}"
        handle.save(Checkpoint(run_id=run_id, messages=[{"role": "user", "content": run_id}]))
        handle.enqueue(run_id)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(count)))


def test_a_small_tenant_is_served_beside_a_flood(pg_store: Store) -> None:
    """1,000 queued runs of one tenant, 20 of another, 8 workers serving both: every run is
    claimed once, and the small tenant's last within the first 2 x 8 x 20 claims."""
    _queue(pg_store, "flood", BIG)
    _queue(pg_store, "trickle", SMALL)
    order: list[tuple[str, str]] = []
    lock = threading.Lock()

    def handler(job: Job) -> Status:
        with lock:
            order.append((job.store.tenant, job.lease.run_id))
        return Status.DONE

    workers = [
        Worker(pg_store, handler, worker_id=f"w{n}", tenants=["flood", "trickle"], lease=60, poll=0.01)
        for n in range(WORKERS)
    ]
    with ThreadPoolExecutor(WORKERS) as pool:
        handled = sum(pool.map(lambda worker: worker.run(stop_when_idle=True), workers))
    assert handled == BIG + SMALL
    claimed = Counter(order)
    assert len(claimed) == BIG + SMALL
    assert max(claimed.values()) == 1
    last_small = max(index for index, (tenant, _) in enumerate(order) if tenant == "trickle")
    assert last_small < 2 * WORKERS * SMALL, last_small
    for tenant in ("flood", "trickle"):
        assert all(info.status == Status.DONE for info in pg_store.for_tenant(tenant).runs(limit=2000))


def test_a_hundred_tenants_one_busy_cost_about_one_claim_each(pg_store: Store) -> None:
    """With 100 tenants named and one holding the work, claims stay about one statement each:
    the look across tenants is one statement every look_every claims."""
    tenants = [f"t{n:03d}" for n in range(100)]
    _queue(pg_store, "t042", 200)
    fair = FairClaims(pg_store, tenants)
    taken = 0
    while (claimed := fair.claim("w", lease=60)) is not None:
        store, lease = claimed
        assert store.tenant == "t042"
        store.release(lease, status=Status.DONE)
        taken += 1
    assert taken == 200
    statements = fair.claims + fair.looks
    assert statements <= taken * 1.05 + 3, (fair.claims, fair.looks)


def test_weights_share_the_claims(tmp_path: Path) -> None:
    """On SQLite (a file per tenant, asked one by one): weights 3 and 1 give three claims of the
    first for each of the second while both have work, interleaved."""
    store = safepoint.open_store(f"sqlite:///{tmp_path}/s.db")
    try:
        for tenant in ("heavy", "light"):
            handle = store.for_tenant(tenant)
            for index in range(12):
                run_id = f"{tenant}-{index}"
                handle.save(Checkpoint(run_id=run_id, messages=[]))
                handle.enqueue(run_id)
        fair = FairClaims(store, {"heavy": 3, "light": 1})
        order = []
        for _ in range(8):
            claimed = fair.claim("w", lease=60)
            assert claimed is not None
            handle, lease = claimed
            order.append(handle.tenant)
            handle.release(lease, status=Status.DONE)
        assert order.count("heavy") == 6
        assert order.count("light") == 2
        assert order[:4].count("light") == 1  # interleaved, not in a burst
        fair.close()
    finally:
        store.close()


@pytest.mark.parametrize(
    ("tenants", "error"),
    [
        ([], InvalidArgument),
        ("flood", InvalidArgument),
        (["Upper"], InvalidURL),
        ({"a": 0}, InvalidArgument),
        ({"a": 1.5}, InvalidArgument),
    ],
)
def test_bad_tenant_lists_are_refused(tmp_path: Path, tenants: object, error: type[Exception]) -> None:
    store = safepoint.open_store(f"sqlite:///{tmp_path}/s.db")
    try:
        with pytest.raises(error):
            FairClaims(store, tenants)  # type: ignore[arg-type]
    finally:
        store.close()


def test_a_tenant_limit_holds_across_concurrent_claimers(pg_store: Store) -> None:
    """tenant_limit=3: eight claimers at once (each its own pooled connection) take exactly 3 of
    the tenant's 10 queued runs; another tenant is not held back; a release frees a place."""
    _queue(pg_store, "capped", 10)
    _queue(pg_store, "other", 2)
    capped = pg_store.for_tenant("capped")
    barrier = threading.Barrier(WORKERS)

    def claim(n: int) -> object:
        barrier.wait()
        return capped.claim(f"w{n}", lease=60, tenant_limit=3)

    with ThreadPoolExecutor(WORKERS) as pool:
        leases = [lease for lease in pool.map(claim, range(WORKERS)) if lease is not None]
    assert len(leases) == 3
    assert pg_store.for_tenant("other").claim("w", lease=60, tenant_limit=3) is not None
    assert capped.claim("w9", lease=60, tenant_limit=3) is None
    capped.release(leases[0], status=Status.DONE)  # type: ignore[arg-type]
    assert capped.claim("w9", lease=60, tenant_limit=3) is not None
    with pytest.raises(InvalidArgument):
        capped.claim("w", tenant_limit=0)
