"""Helpers the conformance suites share: fixtures' types, run builders, a query log."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from safepoint.model import Checkpoint
from safepoint.store import Store
from safepoint.store import query as store_ops

Tamper = Callable[[Store, str, int, str], None]


def snapshot(cp: Checkpoint) -> dict[str, Any]:
    """Everything a caller can see in a checkpoint, as plain data (for equality)."""
    data = cp.to_dict()
    data.pop("created_at")
    data.pop("digest")
    return data


def grow(store: Store, run_id: str, steps: int, per_step: int = 2) -> Checkpoint:
    """Save ``steps`` checkpoints of a run, each adding ``per_step`` messages."""
    cp = Checkpoint(run_id=run_id)
    for step in range(steps):
        cp.step = step
        for i in range(per_step):
            cp.messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"{step}.{i}"})
        cp.counters["steps"] = step + 1
        cp.cursors["batch"] = {"done": step}
        store.save(cp)
    return cp


@contextmanager
def declaring(store: Store, version: int) -> Iterator[Store]:
    """``store`` as code whose current schema_version is ``version`` (and no migrations) would use it."""
    saved = store.pipeline
    pipeline = copy.copy(saved)
    pipeline.migrations = None
    pipeline.schema_version = version
    store.pipeline = pipeline
    try:
        yield store
    finally:
        store.pipeline = saved


def messages_written(queries: list[store_ops.Query]) -> int:
    """How many messages a save's queries appended to the message log."""
    # insert_checkpoint, or PostgreSQL's one-statement save_next, carries the added messages.
    return sum(q.params.get("added", 0) for q in queries if q.name in ("insert_checkpoint", "save_next"))


class QueryLog:
    """Wraps a store's driver and records every named query its operations issue."""

    def __init__(self, store: Store) -> None:
        self.queries: list[store_ops.Query] = []
        self._inner: store_ops.Driver = store.driver
        store._driver = self  # type: ignore[assignment]  # test-only interception

    @property
    def dialect(self) -> str:
        return self._inner.dialect

    @property
    def capabilities(self) -> frozenset[str]:
        return self._inner.capabilities

    def run(self, op: store_ops.Op[Any], *, write: bool) -> Any:
        return self._inner.run(self._record(op), write=write)

    def _record(self, op: store_ops.Op[Any]) -> store_ops.Op[Any]:
        rows: Any = None
        while True:
            try:
                query = op.send(rows)
            except StopIteration as stop:
                return stop.value
            rows = yield query
            if rows is not store_ops.UNSUPPORTED:  # only what the driver ran (see Query.optional)
                self.queries.append(query)

    def close(self) -> None:
        self._inner.close()

    def take(self) -> list[store_ops.Query]:
        taken, self.queries = self.queries, []
        return taken
