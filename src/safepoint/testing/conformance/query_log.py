"""Counting queries instead of timing them: ``QueryLog`` wraps a store's driver and records
every named query its operations issue, so a test proves flat cost (DESIGN invariant 3)
by what a save or a load asked the database, not by how long it took."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from safepoint.store import Store
from safepoint.store import query as store_ops


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

    def run_joined(
        self, op: store_ops.Op[Any], rebuild: Callable[[], store_ops.Op[Any]], *, weight: int
    ) -> Any:
        return self._inner.run_joined(self._record(op), lambda: self._record(rebuild()), weight=weight)

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
