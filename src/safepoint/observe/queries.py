"""Statement-level tracing: a driver's named queries reported to the observer's query hook.

``traced`` wraps what a driver drives — an operation (``Op``, yielding
``Query``) on SQLite, the statements of one (``postgres.statements``) on
PostgreSQL — and times each item from the moment the driver takes it until
the driver answers with its rows: sent, run, and its rows read. A driver
wraps only when the observer has a query hook (``observe.query_hook``), so
without one nothing here runs. Attributes never carry a value: the query's
name, the dialect, how many rows came back and, for a batch, how many
parameter sets went. The driver names its answer to an optional query it
lacks (``store.query.UNSUPPORTED``): such a query did not run and is not
reported.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Generator
from typing import Any, Protocol, TypeVar

from safepoint.observe import QueryHook

T = TypeVar("T")


class Named(Protocol):
    """A query or statement as a driver receives it: its name, and its batch when it is one."""

    @property
    def name(self) -> str: ...

    @property
    def many(self) -> list[dict[str, Any]] | None: ...


N = TypeVar("N", bound=Named)


def traced(
    items: Generator[N, list[Any], T], hook: QueryHook, dialect: str, unsupported: list[Any]
) -> Generator[N, list[Any], T]:
    """``items``, each reported to ``hook`` once the driver has answered it (unless its answer is
    ``unsupported``, the driver's for an optional query it lacks)."""
    clock = time.perf_counter
    try:
        item = next(items)
        while True:
            start = clock()
            rows = yield item
            if rows is not unsupported:  # an optional query this driver lacks did not run
                report(hook, item.name, clock() - start, attributes(dialect, len(rows), item.many))
            item = items.send(rows)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        items.close()  # a driver that stops early (an error) leaves nothing to resume


def report(hook: QueryHook, name: str, seconds: float, told: dict[str, str | int | float | bool]) -> None:
    """Tell ``hook``; an observer that fails never breaks a store call, so its error is dropped."""
    with contextlib.suppress(Exception):  # the observer's contract is never to raise; if it does anyway
        hook(name, seconds, told)


def attributes(dialect: str, rows: int, many: list[Any] | None = None) -> dict[str, str | int | float | bool]:
    """What a query hook is told besides the name and the duration (never a value)."""
    told: dict[str, str | int | float | bool] = {"safepoint.dialect": dialect, "safepoint.rows": rows}
    if many is not None:
        told["safepoint.batch"] = len(many)
    return told
