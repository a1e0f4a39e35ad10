"""Recording which named queries each save asks for (``ops.saving.save`` wrapped), for the tests
that hold a save to its statements: one save on PostgreSQL is ``save_next`` alone, a stale
writer's falls back to ``run_head`` and its checks."""

from __future__ import annotations

from typing import Any

import pytest

from safepoint.store.ops import saving
from safepoint.store.query import Op


def record_save_queries(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """From now on in this test, one list per save of the query names it asked for, in order."""
    saves: list[list[str]] = []
    save = saving.save

    def recorded(*args: Any, **kwargs: Any) -> Op[Any]:
        names: list[str] = []
        saves.append(names)
        op = save(*args, **kwargs)
        query = next(op)
        try:
            while True:
                names.append(query.name)
                query = op.send((yield query))
        except StopIteration as stop:
            return stop.value

    monkeypatch.setattr(saving, "save", recorded)  # what save_call builds
    return saves
