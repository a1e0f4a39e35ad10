"""SafepointCheckpointStorage against the Agent Framework's own InMemoryCheckpointStorage.

Every scenario runs on ``InMemoryCheckpointStorage`` and on
``SafepointCheckpointStorage`` (SQLite and PostgreSQL, sync and async stores,
a fresh storage object per call and one reused) with the same inputs, and
must observe exactly the same results: save, load, list, get_latest, list
ids, delete from the middle, re-saves, copy semantics, hostile ids and
values, missing ids.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from agent_framework import InMemoryCheckpointStorage, Message, WorkflowCheckpoint
from agent_framework._workflows._runner_context import WorkflowMessage
from agent_framework.exceptions import WorkflowCheckpointException

from adapter_checks import BACKEND_KINDS, backend_store
from safepoint.adapters.agent_framework import SafepointCheckpointStorage

Make = Callable[[], Any]  # make() -> a storage (the same one, or a new one on the same store)
Backend = Callable[[], AbstractAsyncContextManager[Make]]

HOSTILE_IDS = [
    "../../x",
    "'; DROP TABLE safepoint_runs; --",
    "a\x00b",
    "\u202eevil\u200b\ufeff",
    "x" * 5_000,
    "%2F..%00",
    "",
]
HOSTILE_VALUES: dict[str, Any] = {
    "marker": {"$af": "message", "v": {"data": 1, "source_id": "x"}},
    "log": {"$log": [[0, 3]]},
    "pickled": {"__pickled__": "gAVLAS4=", "__type__": "builtins:int"},
    "secretish": {"$secret": "NAME"},
    "nul": "a\x00b",
    "rtl": "\u202e\u200b",
    "sql": "'; DROP TABLE safepoint_checkpoints; --",
    "huge": "y" * 100_000,
    "long list": [{"n": i, "nested": [i, [i]]} for i in range(40)],
    "numbers": [0, -1, 2**62, 1.5, -0.0, True, None],
}


def checkpoint(name: str, n: int, **fields: Any) -> WorkflowCheckpoint:
    values: dict[str, Any] = {
        "workflow_name": name,
        "graph_signature_hash": "hash",
        "checkpoint_id": f"{name}-{n}",
        "timestamp": f"2025-01-01T00:00:{n:02d}+00:00",
        "iteration_count": n,
        "state": {"conversation": [{"role": "user", "text": f"turn {i}"} for i in range(n)]},
        "messages": {"step": [WorkflowMessage(data={"n": n}, source_id="step", target_id="next")]},
        "metadata": {"superstep": n},
    }
    values.update(fields)
    return WorkflowCheckpoint(**values)


async def observe(call: Any) -> Any:
    """A call's result, or the kind of error it raised (the framework's, or another)."""
    try:
        result = await call
    except WorkflowCheckpointException:
        return "WorkflowCheckpointException"
    if isinstance(result, list):
        return [r.to_dict() if isinstance(r, WorkflowCheckpoint) else r for r in result]
    return result.to_dict() if isinstance(result, WorkflowCheckpoint) else result


async def everything(storage: Any, names: list[str]) -> list[Any]:
    seen = []
    for name in names:
        seen.append(await observe(storage.list_checkpoint_ids(workflow_name=name)))
        seen.append(await observe(storage.list_checkpoints(workflow_name=name)))
        seen.append(await observe(storage.get_latest(workflow_name=name)))
    return seen


# --- scenarios: each returns everything it observed


async def basics(make: Make) -> list[Any]:
    seen: list[Any] = []
    for n in range(6):
        seen.append(await make().save(checkpoint("alpha", n)))
    seen.append(await make().save(checkpoint("beta", 1)))
    seen += await everything(make(), ["alpha", "beta", "gamma"])
    seen.append(await observe(make().load("alpha-2")))
    seen.append(await make().delete("alpha-2"))  # from the middle
    seen.append(await make().delete("alpha-2"))
    seen.append(await observe(make().load("alpha-2")))
    seen.append(await make().delete("alpha-5"))  # the latest: get_latest moves back
    seen += await everything(make(), ["alpha", "beta"])
    seen.append(await make().save(checkpoint("alpha", 7)))
    seen += await everything(make(), ["alpha"])
    return seen


async def resaves(make: Make) -> list[Any]:
    """Saving an id again replaces it in place; under another workflow name, it moves there."""
    for n in range(4):
        await make().save(checkpoint("w", n))
    await make().save(checkpoint("w", 1, iteration_count=99, state={"again": True}))
    seen = await everything(make(), ["w"])
    await make().save(checkpoint("other", 2, checkpoint_id="w-2"))
    seen += await everything(make(), ["w", "other"])
    seen.append(await observe(make().load("w-2")))
    seen.append(await make().delete("w-0"))
    await make().save(checkpoint("w", 0))  # deleted, then saved again: now the last
    seen += await everything(make(), ["w"])
    return seen


async def copies(make: Make) -> list[Any]:
    """save stores a copy; every load returns a fresh one."""
    cp = checkpoint("c", 3)
    await make().save(cp)
    cp.state["conversation"].append({"role": "user", "text": "changed after save"})
    cp.messages["step"][0].data["n"] = "changed"
    cp.metadata["superstep"] = -1
    storage = make()
    first, second = await storage.load("c-3"), await storage.load("c-3")
    fresh = first is not second and first.state is not second.state
    first.state["conversation"].clear()
    first.messages["step"][0].data["n"] = "mutated"
    listed = await storage.list_checkpoints(workflow_name="c")
    latest = await storage.get_latest(workflow_name="c")
    return [fresh, second.to_dict(), await observe(storage.load("c-3")), listed[0] is not latest]


async def hostile(make: Make) -> list[Any]:
    """Hostile ids, workflow names and values come back exactly and mean nothing."""
    for n, text in enumerate(HOSTILE_IDS):
        await make().save(
            checkpoint(text or "empty", n, checkpoint_id=text, state=copy.deepcopy(HOSTILE_VALUES))
        )
        await make().save(checkpoint("shared", n, checkpoint_id="s" + text, metadata={"id": text}))
    seen = await everything(make(), [text or "empty" for text in HOSTILE_IDS] + ["shared"])
    for text in HOSTILE_IDS:
        seen.append(await observe(make().load(text)))
        seen.append(await observe(make().load(text + "/missing")))
    seen.append(await make().delete(HOSTILE_IDS[0]))
    seen.append(await make().delete("s" + HOSTILE_IDS[2]))
    seen += await everything(make(), ["shared", HOSTILE_IDS[0]])
    return seen


async def missing(make: Make) -> list[Any]:
    """Nothing saved: every read is empty, every id missing."""
    storage = make()
    seen = await everything(storage, ["none", ""])
    for ident in ["nope", "", "../x", "a\x00"]:
        seen.append(await observe(storage.load(ident)))
        seen.append(await storage.delete(ident))
    return seen


async def framework_values(make: Make) -> list[Any]:
    """Framework objects inside a checkpoint: workflow messages and chat messages, revived."""
    chat = Message(role="assistant", contents=["hello, ünïcode ✓"])
    cp = checkpoint("f", 2, state={"history": [chat], "last": chat, "n": 1})
    await make().save(cp)
    loaded = await make().load("f-2")
    return [
        [m.to_dict() for m in loaded.state["history"]],
        loaded.state["last"].to_dict(),
        loaded.messages["step"][0],
        type(loaded.messages["step"][0]).__name__,
    ]


SCENARIOS = [basics, resaves, copies, hostile, missing, framework_values]
BACKENDS = BACKEND_KINDS


@asynccontextmanager
async def in_memory() -> AsyncIterator[Make]:
    storage = InMemoryCheckpointStorage()
    yield lambda: storage


def safepoint_backend(kind: str, tmp: Path, fresh: bool) -> Backend:
    @asynccontextmanager
    async def backend() -> AsyncIterator[Make]:
        async with backend_store(kind, tmp) as store:
            reused = SafepointCheckpointStorage(store)
            yield (lambda: SafepointCheckpointStorage(store)) if fresh else (lambda: reused)

    return backend


@pytest.mark.parametrize("objects", ["fresh", "reused"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
@pytest.mark.parametrize("backend", BACKENDS)
def test_same_results_as_in_memory_storage(
    scenario: Callable[[Make], Any], backend: str, objects: str, tmp_path: Path
) -> None:
    """On the same calls, SafepointCheckpointStorage observes exactly what InMemoryCheckpointStorage does
    (a new storage object for each call, or one for all)."""

    async def run(factory: Backend) -> Any:
        async with factory() as make:
            return await scenario(make)

    expected = asyncio.run(run(in_memory))
    assert expected
    assert expected != [None] * len(expected)
    assert asyncio.run(run(safepoint_backend(backend, tmp_path, objects == "fresh"))) == expected


def test_the_scenarios_observe_something() -> None:
    """The reference observations are what the framework documents (so equality above means something)."""
    seen = asyncio.run(basics(lambda: STORAGE))
    assert seen[:7] == [f"alpha-{n}" for n in range(6)] + ["beta-1"]
    assert seen[7] == [f"alpha-{n}" for n in range(6)]
    assert seen[9]["checkpoint_id"] == "alpha-5"
    assert seen[17:21] == [True, False, "WorkflowCheckpointException", True]


STORAGE = InMemoryCheckpointStorage()
