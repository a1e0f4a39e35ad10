"""SafepointCheckpointStorage under a real workflow, and what safepoint adds to the framework's contract.

A real ``WorkflowBuilder`` workflow (offline: a fake model's canned turns)
checkpoints on the storage, ends as it does on ``InMemoryCheckpointStorage``,
and resumes from a middle checkpoint in a fresh process to the same end.
Then: values the framework would pickle are refused naming their path; a
conversation carried in the state is stored once; deletes are steps that
``safepoint verify`` accepts; index runs are bookkeeping; two writers are
fenced; the example runs; the adapter without the framework says what to install.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from agent_framework import InMemoryCheckpointStorage, WorkflowCheckpoint
from pydantic import BaseModel

import safepoint
from adapter_checks import run_example
from helpers.agent_framework_crash_agent import NAME, RUN_ID, Deterministic, build, run_to_end
from safepoint import InvalidArgument, NotJSONCompatible
from safepoint.adapters.agent_framework import SafepointCheckpointStorage
from safepoint.frameworks import is_bookkeeping

SRC = Path(__file__).parent.parent / "src"
TESTS = Path(__file__).parent


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)])}


class Order(BaseModel):
    sku: str
    quantity: int


def test_a_real_workflow_ends_as_on_the_in_memory_storage(tmp_path: Path) -> None:
    """Six supersteps on each storage: the same conversation and the same checkpoints, field by field."""
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}")
    ours, reference = SafepointCheckpointStorage(store), InMemoryCheckpointStorage()
    assert asyncio.run(run_to_end(ours, 6)) == asyncio.run(run_to_end(reference, 6))
    mine = asyncio.run(ours.list_checkpoints(workflow_name=NAME))
    theirs = asyncio.run(reference.list_checkpoints(workflow_name=NAME))
    assert len(mine) == len(theirs) == 7
    for a, b in zip(mine, theirs, strict=True):
        assert (a.state, a.messages, a.iteration_count) == (b.state, b.messages, b.iteration_count)
    store.close()


def test_resumed_from_a_middle_checkpoint_in_a_fresh_process(tmp_path: Path) -> None:
    """A run stopped after its third checkpoint resumes in another process and reaches the same end."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = safepoint.open_store(url)
    storage = SafepointCheckpointStorage(store)
    uninterrupted = asyncio.run(run_to_end(InMemoryCheckpointStorage(), 6))
    asyncio.run(build(Deterministic(storage), 6).run(0))
    third = f"{NAME}-2"
    for later in range(3, 7):  # as if the process had died after the third checkpoint
        assert asyncio.run(storage.delete(f"{NAME}-{later}"))
    store.close()
    code = textwrap.dedent(
        f"""
        import asyncio, json
        from agent_framework import WorkflowCheckpoint
        from helpers.agent_framework_crash_agent import NAME, Deterministic, build
        from safepoint.adapters.agent_framework import SafepointCheckpointStorage
        storage = SafepointCheckpointStorage({url!r})
        result = asyncio.run(build(Deterministic(storage), 6).run(checkpoint_id={third!r}))
        final = asyncio.run(storage.get_latest(workflow_name=NAME))
        print(json.dumps([result.get_outputs(), final.state["conversation"]]))
        storage.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env(), check=False
    )
    assert done.returncode == 0, done.stderr
    outputs, conversation = json.loads(done.stdout.splitlines()[-1])
    assert outputs == [12]
    assert conversation == uninterrupted


def test_values_the_framework_would_pickle_are_refused_naming_their_path(tmp_path: Path) -> None:
    """Tuples, sets, datetimes, objects, foreign models, NaN, lone surrogates: refused, nothing written."""
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}")
    storage = SafepointCheckpointStorage(store)
    bad: list[tuple[Any, str]] = [
        ({"pair": (1, 2)}, "checkpoint.state.pair"),
        ({"tags": {"a"}}, "checkpoint.state.tags"),
        ({"orders": [1, {"when": datetime.now(UTC)}]}, "checkpoint.state.orders[1].when"),
        ({"obj": object()}, "checkpoint.state.obj"),
        ({"model": Order(sku="a", quantity=1)}, "checkpoint.state.model"),
        ({"nan": float("nan")}, "checkpoint.state.nan"),
        ({"text": "\ud800"}, "checkpoint.state.text"),
        ({1: "int key"}, "checkpoint.state"),
    ]
    for state, path in bad:
        cp = WorkflowCheckpoint(workflow_name="w", graph_signature_hash="h", state=state)
        with pytest.raises(NotJSONCompatible) as refused:
            asyncio.run(storage.save(cp))
        assert refused.value.path == path
        assert "int key" not in str(refused.value)
    with pytest.raises(InvalidArgument, match="timestamp"):
        asyncio.run(
            storage.save(WorkflowCheckpoint(workflow_name="w", graph_signature_hash="h", timestamp="x"))
        )
    assert store.runs().items == []
    allowed = SafepointCheckpointStorage(store, allowed_types=[Order])
    cp = WorkflowCheckpoint(
        workflow_name="w", graph_signature_hash="h", state={"o": Order(sku="a", quantity=2)}
    )
    asyncio.run(allowed.save(cp))
    assert asyncio.run(allowed.load(cp.checkpoint_id)).state == {"o": Order(sku="a", quantity=2)}
    store.close()


def test_a_conversation_in_the_state_is_stored_once(tmp_path: Path) -> None:
    """Every checkpoint holds the whole conversation, yet each step appends only the turn's two
    messages (and its journal entry); every step loads whole."""
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}")
    asyncio.run(run_to_end(SafepointCheckpointStorage(store), 8))
    counts = [info.message_count for info in store.history(RUN_ID)]
    growth = [b - a for a, b in itertools.pairwise(counts[4:])]
    assert growth == [3] * 5
    storage = SafepointCheckpointStorage(store)
    for n in range(9):
        assert len(asyncio.run(storage.load(f"{NAME}-{n}")).state.get("conversation", [])) == 2 * n
    store.close()


def test_deletes_are_steps_that_verify_accepts_and_index_runs_are_bookkeeping(tmp_path: Path) -> None:
    """A delete from the middle is a new step: every checkpoint still verifies; index runs are hidden."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = safepoint.open_store(url)
    storage = SafepointCheckpointStorage(store)
    asyncio.run(run_to_end(storage, 4))
    assert asyncio.run(storage.delete(f"{NAME}-2"))
    assert store.load(RUN_ID).state == {"op": "delete", "id": f"{NAME}-2"}
    runs = {info.run_id: info for info in store.runs(limit=100).items}
    index = [info for info in runs.values() if info.labels.get("safepoint.role") == "index"]
    assert len(index) == 4
    assert all(is_bookkeeping(info.labels) for info in index)
    assert not is_bookkeeping(runs[RUN_ID].labels)
    assert runs[RUN_ID].labels["agent_framework.workflow_name"] == NAME
    store.close()
    verified = subprocess.run(
        [sys.executable, "-m", "safepoint.cli", "verify", "--store", url],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_two_writers_on_one_workflow_are_fenced(tmp_path: Path) -> None:
    """Two storages (two stores on one file) saving to one workflow in turn: each retries on the
    other's head, and every checkpoint is kept."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    one, two = SafepointCheckpointStorage(url), SafepointCheckpointStorage(url)

    async def scenario() -> list[str]:
        for n in range(6):
            writer = one if n % 2 else two
            await writer.save(
                WorkflowCheckpoint(workflow_name="w", graph_signature_hash="h", checkpoint_id=str(n))
            )
        return await one.list_checkpoint_ids(workflow_name="w")

    assert asyncio.run(scenario()) == [str(n) for n in range(6)]
    one.close()
    two.close()


def test_the_example_runs(tmp_path: Path) -> None:
    """examples/agent_framework_example.py (the code docs/adapters.md shows) runs offline as documented."""
    lines = run_example("agent_framework", tmp_path)
    assert lines[:3] == [
        "order total: 42",
        "checkpoints in the store: 6",
        "resumed from superstep 3: order total 42",
    ]
    assert lines[3:6] == [
        "journaled run cut short right after the payment",
        "resumed: done: charged 42 | payments: 1 | model requests: 2 | replayed: 1",
        "counters: {'tokens_in': 80, 'tokens_out': 16, 'model_calls': 2, 'tool_calls': 1}",
    ]
