"""A run as its flows see the store: a worker's, where every call rides out an outage,
and a held one's, where every save goes under the hold's lease.

Under a lease (``job.open_run()``, or ``Run.open(…, lease=job.lease)``, in a
``Worker`` handler) the harness serves its flows through these views instead
of the bare store: each call goes through the workers' retry policy
(``safepoint.retrying``), and a save whose commit was in doubt is checked
against the stored digest instead of being written twice. Without a lease
the flows of an exclusive ``Run`` see ``HeldStore``: the store, with every
save made under the hold's lease (``holders.py``), so a writer that lost it
gets ``LeaseLost`` and writes nothing; an outage is the caller's.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from safepoint import retrying
from safepoint.model import Checkpoint
from safepoint.records import CheckpointInfo, Lease, Page, Retention, RunInfo
from safepoint.store import AsyncStore, Store

from .exclusive import Holding


def _load_args(run_id: str, step: int | None, resolve_secrets: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (run_id, step), ({} if resolve_secrets is False else {"resolve_secrets": resolve_secrets})


class LeasedStore:
    """The calls of ``store`` that flows make (``safepoint.flow.FlowStore``), for a run held
    under ``lease``: each retried, and a save checked before it is written again."""

    def __init__(self, store: Store, lease: Lease) -> None:
        self._store = store
        self._lease = lease

    @property
    def schema_version(self) -> int:
        return self._store.schema_version

    def load(self, run_id: str, step: int | None = None, *, resolve_secrets: Any = False) -> Checkpoint:
        args, kwargs = _load_args(run_id, step, resolve_secrets)
        return retrying.call(
            "load", partial(self._store.load, *args, **kwargs), observer=self._store.observer
        )

    def run(self, run_id: str) -> RunInfo:
        return retrying.call("run", partial(self._store.run, run_id), observer=self._store.observer)

    def save(self, checkpoint: Checkpoint) -> CheckpointInfo:
        return retrying.save(self._store, checkpoint, self._lease)

    def delete_run(self, run_id: str) -> None:
        retrying.call("delete_run", partial(self._store.delete_run, run_id), observer=self._store.observer)

    def prune_run(self, run_id: str, policy: Retention | None = None) -> Any:
        prune = partial(self._store.prune_run, run_id, policy)
        return retrying.call("prune_run", prune, observer=self._store.observer)

    def runs(
        self, *, labels: dict[str, str] | None = None, limit: int = 100, cursor: str | None = None
    ) -> Page[RunInfo]:
        listing = partial(self._store.runs, labels=labels, limit=limit, cursor=cursor)
        return retrying.call("runs", listing, observer=self._store.observer)


class AsyncLeasedStore:
    """``LeasedStore`` on an ``AsyncStore``: the same retries, awaited (``safepoint.flow.AsyncFlowStore``)."""

    def __init__(self, store: AsyncStore, lease: Lease) -> None:
        self._store = store
        self._lease = lease

    @property
    def schema_version(self) -> int:
        return self._store.schema_version

    async def load(self, run_id: str, step: int | None = None, *, resolve_secrets: Any = False) -> Checkpoint:
        args, kwargs = _load_args(run_id, step, resolve_secrets)
        load = partial(self._store.load, *args, **kwargs)
        return await retrying.call_async("load", load, observer=self._store.observer)

    async def run(self, run_id: str) -> RunInfo:
        return await retrying.call_async(
            "run", partial(self._store.run, run_id), observer=self._store.observer
        )

    async def save(self, checkpoint: Checkpoint) -> CheckpointInfo:
        return await retrying.save_async(self._store, checkpoint, self._lease)

    async def delete_run(self, run_id: str) -> None:
        delete = partial(self._store.delete_run, run_id)
        await retrying.call_async("delete_run", delete, observer=self._store.observer)

    async def prune_run(self, run_id: str, policy: Retention | None = None) -> Any:
        prune = partial(self._store.prune_run, run_id, policy)
        return await retrying.call_async("prune_run", prune, observer=self._store.observer)

    async def runs(
        self, *, labels: dict[str, str] | None = None, limit: int = 100, cursor: str | None = None
    ) -> Page[RunInfo]:
        listing = partial(self._store.runs, labels=labels, limit=limit, cursor=cursor)
        return await retrying.call_async("runs", listing, observer=self._store.observer)


class HeldStore:
    """``store`` for a held run's flows (``safepoint.flow.FlowStore``): saves go under the hold's lease."""

    def __init__(self, store: Store, holding: Holding) -> None:
        self._store = store
        self._holding = holding

    @property
    def schema_version(self) -> int:
        return self._store.schema_version

    def load(self, run_id: str, step: int | None = None, *, resolve_secrets: Any = False) -> Checkpoint:
        return self._store.load(run_id, step, resolve_secrets=resolve_secrets)

    def run(self, run_id: str) -> RunInfo:
        return self._store.run(run_id)

    def save(self, checkpoint: Checkpoint) -> CheckpointInfo:
        return self._store.save(checkpoint, lease=self._holding.lease)

    def delete_run(self, run_id: str) -> None:
        self._store.delete_run(run_id)

    def prune_run(self, run_id: str, policy: Retention | None = None) -> Any:
        return self._store.prune_run(run_id, policy)

    def runs(
        self, *, labels: dict[str, str] | None = None, limit: int = 100, cursor: str | None = None
    ) -> Page[RunInfo]:
        return self._store.runs(labels=labels, limit=limit, cursor=cursor)


class AsyncHeldStore:
    """``HeldStore`` on an ``AsyncStore`` (``safepoint.flow.AsyncFlowStore``)."""

    def __init__(self, store: AsyncStore, holding: Holding) -> None:
        self._store = store
        self._holding = holding

    @property
    def schema_version(self) -> int:
        return self._store.schema_version

    async def load(self, run_id: str, step: int | None = None, *, resolve_secrets: Any = False) -> Checkpoint:
        return await self._store.load(run_id, step, resolve_secrets=resolve_secrets)

    async def run(self, run_id: str) -> RunInfo:
        return await self._store.run(run_id)

    async def save(self, checkpoint: Checkpoint) -> CheckpointInfo:
        return await self._store.save(checkpoint, lease=self._holding.lease)

    async def delete_run(self, run_id: str) -> None:
        await self._store.delete_run(run_id)

    async def prune_run(self, run_id: str, policy: Retention | None = None) -> Any:
        return await self._store.prune_run(run_id, policy)

    async def runs(
        self, *, labels: dict[str, str] | None = None, limit: int = 100, cursor: str | None = None
    ) -> Page[RunInfo]:
        return await self._store.runs(labels=labels, limit=limit, cursor=cursor)
