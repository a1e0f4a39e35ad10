"""How long a call journal entry lives (issue 32, item 1), on every backend: as long as the
checkpoint of its step. Retention deletes the entries of the steps it prunes and keeps
those of kept steps and of the step still to come; deleting a run (by hand or by
``delete_finished_after``) deletes its entries; a fork starts with none of its parent's.
``collect_garbage`` keeps every blob an entry's result references — on the files, database
and S3 blob targets (moto's server) — and deletes it once the entry is gone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from blob_server import CREDENTIALS, REGION, start_s3_server
from journal_stores import SYNC_VARIANTS, VARIANTS, Backend, backends, started
from safepoint import Checkpoint, NotFound, Retention, Status
from safepoint.blobs.s3 import S3BlobStore

THRESHOLD = 64


@pytest.fixture(params=VARIANTS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backends(request.param, tmp_path)


@pytest.fixture(params=SYNC_VARIANTS)
def sync_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backends(request.param, tmp_path)


def _step_by_step(store: Any, run_id: str, steps: int) -> Checkpoint:
    """Steps 0 .. steps-1, an entry recorded before each save from step 1 on (so the entry
    ``k<s>`` belongs to step s), and one more, ``future``, for the step still to come."""
    cp = started(store, run_id)
    for step in range(1, steps):
        assert store.record_call(run_id, f"k{step}", {"step": step}).step == step
        cp = cp.next()
        cp.messages.append({"role": "assistant", "content": f"step {step}"})
        store.save(cp)
    assert store.record_call(run_id, "future", "not yet covered").step == steps
    return cp


def _keys(store: Any, run_id: str) -> list[str]:
    return sorted(entry.key for entry in store.recorded_calls(run_id))


def test_retention_deletes_the_entries_of_the_steps_it_prunes(backend: Backend) -> None:
    store = backend.open()
    _step_by_step(store, "run", 5)  # steps 0..4; entries k1..k4 and future (step 5)
    _step_by_step(store, "other", 3)
    dry = store.prune_run("run", Retention(keep_last=2), dry_run=True)
    assert dry.pruned_steps == [0, 1, 2]
    assert _keys(store, "run") == ["future", "k1", "k2", "k3", "k4"]  # a dry run deletes nothing
    pruned = store.prune_run("run", Retention(keep_last=2))
    assert pruned.pruned_steps == [0, 1, 2]
    assert _keys(store, "run") == ["future", "k3", "k4"]  # kept steps and the step to come
    assert store.recorded_call("run", "k2") is None
    assert store.recorded_call("run", "k3").result == {"step": 3}  # type: ignore[union-attr]
    assert _keys(store, "other") == ["future", "k1", "k2"]  # another run's are untouched
    again = store.prune_run("run", Retention(keep_last=1))
    assert again.pruned_steps == [3]
    assert _keys(store, "run") == ["future", "k4"]
    # The entries of a pruned step are gone for good: recording under the key again is new.
    assert store.record_call("run", "k1", "again").written


def test_a_finished_run_deleted_by_retention_takes_its_entries(backend: Backend) -> None:
    store = backend.open()
    cp = _step_by_step(store, "done", 2)
    cp = cp.next()
    cp.status = Status.DONE
    store.save(cp)
    result = store.prune_run("done", Retention(delete_finished_after=timedelta(0)))
    assert result.run_deleted
    with pytest.raises(NotFound):
        store.recorded_calls("done")
    started(store, "done")  # the id used again starts with an empty journal
    assert store.recorded_calls("done") == []
    assert backend.raw("SELECT count(*) FROM safepoint_calls") == [(0,)]


def test_delete_run_deletes_its_entries_and_a_fork_has_none(backend: Backend) -> None:
    store = backend.open()
    _step_by_step(store, "parent", 3)
    store.call_intent("parent", "in flight")
    fork = store.fork("parent", 1, new_run_id="child")
    assert fork.step == 1
    assert store.recorded_calls("child") == []  # never replayed into a fork
    assert store.recorded_call("child", "k1") is None
    assert store.record_call("child", "k1", "the fork's own").written
    assert store.recorded_call("parent", "k1").result == {"step": 1}  # type: ignore[union-attr]
    store.delete_run("parent")
    assert store.recorded_call("parent", "k1") is None
    with pytest.raises(NotFound):
        store.recorded_calls("parent")
    assert _keys(store, "child") == ["k1"]
    started(store, "parent")
    assert store.recorded_calls("parent") == []
    rows = backend.raw("SELECT count(*) FROM safepoint_calls")
    assert rows == [(1,)]


# -- gc: every blob target ------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3_server() -> Iterator[dict[str, Any]]:
    server = start_s3_server()
    options = {"endpoint_url": server.endpoint_url, "region": REGION, **CREDENTIALS}
    import boto3  # noqa: PLC0415

    client = boto3.session.Session().client(
        "s3", region_name=REGION, endpoint_url=server.endpoint_url, **CREDENTIALS
    )
    client.create_bucket(Bucket="journal")
    try:
        yield options
    finally:
        client.close()
        server.stop()


def _blob_options(target: str, backend: Backend, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The options that open a handle on ``target`` (the same blobs each time in one test)."""
    if target == "files":
        return {"blobs": str(backend.folder / "blobs")}
    if target == "database":
        return {"blobs": "database"}
    options = request.getfixturevalue("s3_server")
    prefix = f"{backend.folder.name}-{id(backend)}/"  # this test's own
    return {"blobs": S3BlobStore("journal", prefix=prefix, **options)}


@pytest.mark.parametrize("target", ["files", "database", "s3"])
def test_gc_keeps_the_blobs_entries_reference_until_they_go(
    sync_backend: Backend, target: str, request: pytest.FixtureRequest
) -> None:
    backend = sync_backend
    store = backend.open(blob_threshold=THRESHOLD, **_blob_options(target, backend, request))
    _step_by_step(store, "run", 3)
    shared = b"shared by a checkpoint and an entry " * 8
    results = {
        "bytes": b"\x00" + uuid.uuid4().bytes * 40,
        "text": {"long": "a tool's long output " * 20},
        "shared": shared,
    }
    for key, result in results.items():
        assert store.record_call("run", key, result).step == 3
    cp = store.load("run").next()
    cp.messages.append({"role": "assistant", "content": "step 3"})
    started(store, "keeper")
    keeper = store.load("keeper").next()
    keeper.state["copy"] = shared  # the same blob, referenced by another run's checkpoint too
    store.save(keeper)
    collected = store.collect_garbage()
    assert collected.blobs_deleted == 0
    assert collected.blobs_kept >= 3
    reopened = backend.open(blob_threshold=THRESHOLD, **_blob_options(target, backend, request))
    for key, result in results.items():
        assert reopened.recorded_call("run", key).result == result  # type: ignore[union-attr]
    # Pruning step 3's checkpoint (it is the step still to come: save it first) frees them.
    store.save(cp)
    cp = cp.next()
    cp.messages.append({"role": "assistant", "content": "step 4"})
    store.save(cp)
    assert store.prune_run("run", Retention(keep_last=1)).pruned_steps == [0, 1, 2, 3]
    assert store.recorded_call("run", "bytes") is None
    collected = store.collect_garbage()
    assert collected.blobs_deleted == 2  # the bytes and the text; the shared one is kept
    assert store.load("keeper").state["copy"] == shared
    store.delete_run("keeper")
    assert store.collect_garbage().blobs_deleted == 1


def test_gc_deletes_an_entry_blob_once_its_run_is_deleted(sync_backend: Backend) -> None:
    store = sync_backend.open(blob_threshold=THRESHOLD)
    started(store, "run")
    store.record_call("run", "big", b"\x01" * 1000)
    assert store.collect_garbage().blobs_deleted == 0
    assert store.recorded_call("run", "big").result == b"\x01" * 1000  # type: ignore[union-attr]
    store.delete_run("run")
    assert store.collect_garbage().blobs_deleted == 1
