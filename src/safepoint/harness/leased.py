"""A run's flows as its ``Run`` has them served: under a worker's lease, where every store
call rides out an outage, or under the ``Run``'s own hold, where every save goes under the
hold's lease.

Both are filters over the flow (``safepoint.twins.translate``), written once
for ``Run`` and ``AsyncRun``: what they yield are the flow's own requests
or calls of the store (``Invoke``), which either loop serves.

Under a lease (``job.open_run()``, or ``Run.open(…, lease=job.lease)``, in a
``Worker`` handler) each store request goes through the workers' retry
policy (``safepoint.retrying``), and a save whose commit was in doubt is
checked against the stored digest instead of being written twice. (A
``FindRuns`` is retried whole; a ``Run``'s flows ask none.) Without a lease
the flows of an exclusive ``Run`` are served by ``held``: each save is made
under the hold's lease (``holders.py``), so a writer that lost it gets
``LeaseLost`` and writes nothing; an outage is the caller's. Either way
the call journal's writes (``RecordCall``, ``CallIntent``) go under the
same lease as the saves.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from safepoint import retrying
from safepoint.flow import CallIntent, Delete, FindRuns, Head, KeepLast, Load, RecordCall, RecordedCall, Save
from safepoint.records import Lease
from safepoint.store import AsyncStore, Store
from safepoint.twins import Flow, Invoke, ask, translate

from .exclusive import Holding

T = TypeVar("T")
AnyStore = Store | AsyncStore

# The store requests retried under a lease, by the store method each one is (the retries' name).
# The journal's writes are put-if-absent: one retried after its commit was in doubt finds its entry.
_RETRIED = {
    Load: "load",
    Head: "run",
    Delete: "delete_run",
    KeepLast: "prune_run",
    FindRuns: "runs",
    RecordCall: "record_call",
    CallIntent: "call_intent",
    RecordedCall: "recorded_call",
}
_FENCED = (RecordCall, CallIntent)  # journal writes: fenced by the run's lease, as saves are


def leased(store: AnyStore, lease: Lease, flow: Flow[T]) -> Flow[T]:
    """``flow`` for a run held under ``lease``: each store request retried, a save checked
    before it is written again (``retrying.saving``)."""
    return translate(flow, partial(_under_lease, store, lease))


def held(store: AnyStore, holding: Holding, flow: Flow[T]) -> Flow[T]:
    """``flow`` for a held run: each save made under the hold's lease as it is when the save is asked."""
    return translate(flow, partial(_under_hold, store, holding))


def _under_lease(store: AnyStore, lease: Lease, request: Any) -> Any:
    if isinstance(request, Save):
        return retrying.saving(store, request.checkpoint, lease)
    if isinstance(request, _FENCED):
        request = replace(request, lease=lease)
    operation = _RETRIED.get(type(request))
    if operation is None:  # user code (Invoke), the store's schema version: as asked
        return request
    return retrying.retried(operation, partial(ask, request), observer=store.observer)


def _under_hold(store: AnyStore, holding: Holding, request: Any) -> Any:
    if isinstance(request, Save):
        return Invoke(store.save, (request.checkpoint,), {"lease": holding.lease})
    if isinstance(request, _FENCED):
        return replace(request, lease=holding.lease)
    return request
