"""Runs the conformance suites build and compare: the ``tamper`` fixture's type, a run
grown step by step, a checkpoint as plain data, a store declaring another schema_version."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from safepoint.model import Checkpoint
from safepoint.store import Store

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
    """A second handle on ``store``'s database, as code whose current schema_version is
    ``version`` (and no migrations) would open it; ``store`` itself is left as it is."""
    settings = store.settings.replace(migrations=None, schema_version=version)
    declared = Store(store.driver, url=store.url, settings=settings)
    declared.observer = store.observer
    yield declared  # not closed: it shares the first handle's driver
