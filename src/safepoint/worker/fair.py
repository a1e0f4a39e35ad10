"""``FairClaims``: a worker's claims across the tenants it serves, one tenant per claim, in turn.

A worker that serves many tenants must not let one tenant's flood of queued
runs starve another's. It names its tenants (with weights); each claim is a
claim of one tenant's handle (``Store.for_tenant``), so its transaction sets
that tenant alone — no wildcard exists that the application role could set
instead. Which tenant goes next is a smooth weighted round robin over the
tenants that have a claimable run: a tenant of weight 2 gets two claims for
another's one, interleaved rather than in bursts.

Knowing who has claimable runs costs one look (``Store.claimable_tenants``:
one statement on PostgreSQL for any number of tenants; on SQLite, whose
tenants are files of their own, one ``claimable_in`` per tenant). A look is
taken when the tenants believed busy are used up, and again every
``look_every`` claims, so a tenant whose runs arrive while others are busy
gets its turn within that many claims. With a hundred tenants of which one
is busy, that is about one claim statement per claim.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import timedelta

from safepoint.errors import InvalidArgument
from safepoint.records import Lease
from safepoint.store import Store
from safepoint.store.admin import check_tenant

MAX_WEIGHT = 1000


class FairClaims:
    """Claims for a worker serving ``tenants`` (names, or names and integer weights) of ``store``.

    ``tenant_limit``: at most this many runs of one tenant leased at once,
    across every worker (``Store.claim(tenant_limit=)``). ``look_every``:
    claims between two looks for tenants with claimable runs (default: the
    number of tenants, at least 8). Thread-safe. The tenants' handles share
    ``store``'s connections and close with it.
    """

    def __init__(
        self,
        store: Store,
        tenants: Mapping[str, int] | Iterable[str],
        *,
        tenant_limit: int | None = None,
        look_every: int | None = None,
    ) -> None:
        self.weights = _weights(tenants)
        if tenant_limit is not None and (type(tenant_limit) is not int or tenant_limit < 1):
            raise InvalidArgument("tenant_limit must be None or an int of at least 1")
        every = look_every if look_every is not None else max(8, len(self.weights))
        if type(every) is not int or every < 1:
            raise InvalidArgument("look_every must be an int of at least 1")
        self.store = store
        self.tenant_limit = tenant_limit
        self.look_every = every
        self.looks = 0  # how many looks were taken: the cost beside the claims (benchmarks, tests)
        self.claims = 0  # claim statements sent, whether they took a run or not
        self._handles: dict[str, Store] = {}
        self._active: list[str] = []  # the tenants believed to have a claimable run
        self._credit = dict.fromkeys(self.weights, 0)
        self._since_look = 0
        self._lock = threading.RLock()  # a look (under it) opens handles (which take it too)

    def handle(self, tenant: str) -> Store:
        """The store handle of ``tenant`` (made once, sharing ``store``'s connections)."""
        with self._lock:
            found = self._handles.get(tenant)
            if found is None:
                found = self._handles[tenant] = self.store.for_tenant(tenant)
            return found

    def claim(self, worker_id: str, *, lease: float | timedelta = 30.0) -> tuple[Store, Lease] | None:
        """One run of the tenant whose turn it is, with the handle to work on it through; None
        when no tenant has a claimable run."""
        looked = False
        while True:
            with self._lock:
                if not self._active or self._since_look >= self.look_every:
                    if looked:
                        return None
                    self._active = self._look()
                    self._since_look, looked = 0, True
                    if not self._active:
                        return None
                tenant = self._next()
                self._since_look += 1
                self.claims += 1
            store = self.handle(tenant)
            taken = store.claim(worker_id, lease=lease, tenant_limit=self.tenant_limit)
            if taken is not None:
                return store, taken
            with self._lock:  # empty, or at its limit: not asked again before the next look
                if tenant in self._active:
                    self._active.remove(tenant)

    def close(self) -> None:
        """Close the tenants' handles that have connections of their own (SQLite files)."""
        with self._lock:
            handles, self._handles = list(self._handles.values()), {}
        for handle in handles:
            if handle is not self.store:
                handle.close()

    def _look(self) -> list[str]:
        """The tenants with a claimable run now, in the order they were named."""
        self.looks += 1
        names = list(self.weights)
        found = self.store.claimable_tenants(names)
        if found is not None:
            return found
        return [name for name in names if self._claimable_now(name)]

    def _claimable_now(self, tenant: str) -> bool:
        wait = self.handle(tenant).claimable_in()
        return wait is not None and wait <= timedelta(0)

    def _next(self) -> str:
        """Smooth weighted round robin over the active tenants: each gains its weight, the
        richest goes and pays the total back."""
        total = 0
        best = self._active[0]
        for tenant in self._active:
            weight = self.weights[tenant]
            self._credit[tenant] += weight
            total += weight
            if self._credit[tenant] > self._credit[best]:
                best = tenant
        self._credit[best] -= total
        return best


def _weights(tenants: Mapping[str, int] | Iterable[str]) -> dict[str, int]:
    if isinstance(tenants, str):
        raise InvalidArgument("tenants must be a list of tenant names or a dict of names and weights")
    pairs = list(tenants.items()) if isinstance(tenants, Mapping) else [(name, 1) for name in tenants]
    weights: dict[str, int] = {}
    for name, weight in pairs:
        check_tenant(name, what="each tenant")
        if type(weight) is not int or not 1 <= weight <= MAX_WEIGHT:
            raise InvalidArgument(f"each tenant's weight must be an int from 1 to {MAX_WEIGHT}")
        weights[name] = weight
    if not weights:
        raise InvalidArgument("a worker serving tenants needs at least one tenant")
    return weights
