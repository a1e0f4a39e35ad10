"""Large values through the checkpoint store: offload, dedup, crash ordering, corruption, retention, GC."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import boto3
import psycopg
import pytest

import safepoint
from safepoint import BlobCorrupt, Checkpoint, Store
from safepoint.blobs import FileSystemBlobStore, S3BlobStore
from safepoint.records import Retention

HELPERS = Path(__file__).parent / "helpers"
sys.path.insert(0, str(Path(__file__).parent))
from blob_server import CREDENTIALS, REGION, start_s3_server  # noqa: E402
from conftest_postgres import fresh_schema, raw, require_postgres  # noqa: E402

MB = 1024 * 1024


def output(seed: object, size: int) -> str:
    """A deterministic text value of ``size`` bytes (ASCII), different per seed."""
    block = hashlib.sha256(str(seed).encode()).hexdigest()
    return (block * (size // len(block) + 1))[:size]


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = start_s3_server()
    client = boto3.session.Session().client(
        "s3", endpoint_url=server.endpoint_url, region_name=REGION, **CREDENTIALS
    )
    client.create_bucket(Bucket="offload")
    client.close()
    try:
        yield server.endpoint_url
    finally:
        server.stop()


@pytest.fixture(params=["filesystem", "sqlite-table", "postgresql-table", "s3"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Each blob store, behind a checkpoint store, as a new user would configure it."""
    kind = request.param
    if kind == "filesystem":
        yield lambda: safepoint.open_store(f"sqlite:///{tmp_path / 'fs.db'}")
    elif kind == "sqlite-table":
        yield lambda: safepoint.open_store(f"sqlite:///{tmp_path / 'db.db'}", blobs="database")
    elif kind == "s3":
        endpoint = request.getfixturevalue("s3_endpoint")
        blobs = S3BlobStore(
            "offload", prefix=f"{tmp_path.name}/", endpoint_url=endpoint, region=REGION, **CREDENTIALS
        )
        yield lambda: safepoint.open_store(f"sqlite:///{tmp_path / 's3.db'}", blobs=blobs)
    else:
        dsn = require_postgres()
        with fresh_schema(dsn) as schema:
            yield lambda: safepoint.open_store(dsn, schema=schema)


def test_a_50_mb_tool_output_round_trips(opener: Callable[[], Store]) -> None:
    """A 50 MB tool output is offloaded, the checkpoint stays small, and it loads back exactly."""
    big = output(1, 50 * MB)
    with opener() as store:
        cp = Checkpoint(run_id="big")
        cp.messages.append({"role": "tool", "content": big})
        cp.pending_action = {"tool": "fetch", "result": big}
        store.save(cp)
        raw_cp = store.load("big", fetch_blobs=False)
        ref = raw_cp.messages[0]["content"]
        assert ref["$blob"]["size"] == 50 * MB
        assert raw_cp.pending_action == {"tool": "fetch", "result": ref}
    with opener() as store:  # a fresh process would see the same
        loaded = store.load("big")
        assert loaded.messages[0]["content"] == big
        assert loaded.pending_action["result"] == big
        assert store.fetch_blob(ref) == big


def test_the_same_output_every_step_is_stored_once(tmp_path: Path) -> None:
    """100 steps with the same 1 MB output: one blob, bytes stored within 1.1x of the unique content."""
    path = tmp_path / "dedup.db"
    with safepoint.open_store(f"sqlite:///{path}") as store:
        cp = Checkpoint(run_id="dedup")
        same = output(7, MB)
        for step in range(100):
            cp.messages.append({"role": "tool", "content": same})
            cp.messages.append({"role": "assistant", "content": f"step {step}"})
            store.save(cp)
            cp = cp.next()
        assert store.load("dedup").messages[198]["content"] == same
    blob_files = [p for p in (tmp_path / "dedup.db.blobs").rglob("*") if p.is_file()]
    assert len(blob_files) == 1
    # What the run added to the store: the blob files, and the database's growth
    # over an empty store's (its schema pages are a fixed cost, ~36 KB).
    empty = tmp_path / "empty.db"
    safepoint.open_store(f"sqlite:///{empty}").close()
    stored = sum(p.stat().st_size for p in blob_files) + path.stat().st_size - empty.stat().st_size
    unique = MB + sum(len(f"step {i}") for i in range(100))
    assert stored / unique <= 1.1


def test_a_blob_altered_on_disk_names_run_step_and_digest(tmp_path: Path) -> None:
    """Flipped bytes in a blob file: BlobCorrupt (a CorruptCheckpoint) naming run, step and digest."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'c.db'}") as store:
        cp = Checkpoint(run_id="victim", state={"report": output(3, 200_000)})
        store.save(cp)
        digest = store.load("victim", fetch_blobs=False).state["report"]["$blob"]["sha256"]
        path = FileSystemBlobStore(tmp_path / "c.db.blobs").path_for(digest)
        data = bytearray(path.read_bytes())
        data[1000] ^= 0xFF
        path.write_bytes(bytes(data))
        with pytest.raises(BlobCorrupt) as caught:
            store.load("victim")
        error = caught.value
        assert (error.run_id, error.step, error.digest) == ("victim", 0, digest)
        assert isinstance(error, safepoint.CorruptCheckpoint)
        assert digest in str(error)
        assert "'victim' step 0" in str(error)


def test_a_blob_altered_in_the_database_is_caught_too() -> None:
    """The database blob store verifies what it reads the same way."""
    dsn = require_postgres()
    with fresh_schema(dsn) as schema, safepoint.open_store(dsn, schema=schema) as store:
        store.save(Checkpoint(run_id="victim", state={"report": output(4, 100_000)}))
        raw(dsn, schema, "UPDATE safepoint_blobs SET data = overlay(data placing 'X' from 10 for 1)")
        with pytest.raises(BlobCorrupt, match="'victim' step 0"):
            store.load("victim")


def test_killed_between_blob_write_and_commit_leaves_an_orphan_gc_removes(tmp_path: Path) -> None:
    """SIGKILL after the blob is written but before the row commits: no dangling reference; gc cleans."""
    url = f"sqlite:///{tmp_path / 'k.db'}"
    child = subprocess.run(
        [sys.executable, str(HELPERS / "blob_crash.py"), url], timeout=60, check=False, capture_output=True
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    files = [p for p in (tmp_path / "k.db.blobs").rglob("*") if p.is_file()]
    assert len(files) == 2  # step 0's blob, and the orphan of the killed step 1
    with safepoint.open_store(url) as store:
        head = store.load("crash")
        assert head.step == 0
        assert head.state["out"] == output(0, 100_000)
        result = store.collect_garbage()
        assert result.blobs_deleted == 1
        assert store.load("crash").state["out"] == output(0, 100_000)
    assert len([p for p in (tmp_path / "k.db.blobs").rglob("*") if p.is_file()]) == 1


def test_retention_keeps_exactly_the_expected_checkpoints(tmp_path: Path) -> None:
    """keep_last, keep_for, per-run override and finished-run deletion leave exactly what they promise."""
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'r.db'}", retention=Retention(keep_last=2))

    def run(run_id: str, steps: int, status: str = "running") -> None:
        cp = Checkpoint(run_id=run_id)
        for step in range(steps):
            cp.messages.append({"role": "user", "content": f"{run_id} {step}"})
            cp.state["blob"] = output(f"{run_id}/{step}", 70_000)
            if step == steps - 1:
                cp.status = status
            store.save(cp)
            cp = cp.next()

    run("store-policy", 6)
    run("own-policy", 6)
    run("finished", 3, status="done")
    run("rewritten", 4)
    cp = store.load("rewritten").next()
    cp.messages = [{"role": "system", "content": "summary of 4 turns"}]
    store.save(cp)
    store.set_retention("own-policy", Retention(keep_last=4))
    time.sleep(2.5)
    run("young", 3)
    store.set_retention("young", Retention(keep_last=1, keep_for=timedelta(seconds=2)))
    store.set_retention("finished", Retention(delete_finished_after=timedelta(seconds=1)))
    before = {
        run_id: {s: store.load(run_id, s).to_dict() for s in range(len(store.history(run_id)))}
        for run_id in ("store-policy", "own-policy", "rewritten", "young")
    }

    from safepoint.store.admin import prune_store  # noqa: PLC0415

    report = prune_store(store)
    assert report.runs_deleted == ["finished"]
    expected = {"store-policy": [4, 5], "own-policy": [2, 3, 4, 5], "rewritten": [3, 4], "young": [0, 1, 2]}
    for run_id, steps in expected.items():
        assert [i.step for i in store.history(run_id)] == steps
        for step in steps:
            assert store.load(run_id, step).to_dict() == before[run_id][step]
    with pytest.raises(safepoint.NotFound):
        store.load("store-policy", 3)
    with pytest.raises(safepoint.NotFound):
        store.run("finished")
    collected = store.collect_garbage()
    assert collected.blobs_deleted > 0
    for run_id, steps in expected.items():
        for step in steps:
            assert store.load(run_id, step).state["blob"] == before[run_id][step]["state"]["blob"]
    assert prune_store(store).checkpoints_pruned == 0  # idempotent
    store.close()


def test_lazy_references_and_thresholds() -> None:
    """fetch_blobs=False returns references; thresholds and per-path rules decide what is offloaded."""
    store = safepoint.open_store("memory://", blob_threshold=1000, blob_rules={"state.keep_inline": 10**9})
    cp = Checkpoint(run_id="t", state={"small": "x" * 1000, "large": "y" * 1001, "keep_inline": "z" * 5000})
    store.save(cp)
    lazy = store.load("t", fetch_blobs=False)
    assert lazy.state["small"] == "x" * 1000
    assert lazy.state["keep_inline"] == "z" * 5000
    assert set(lazy.state["large"]["$blob"]) == {"sha256", "size", "media_type"}
    assert store.fetch_blob(lazy.state["large"]) == "y" * 1001
    assert store.load("t").state == cp.state
    # Saving a lazily loaded checkpoint keeps the reference as it is.
    following = lazy.next()
    store.save(following)
    assert store.load("t").state == cp.state
    with safepoint.open_store("memory://", blobs=False) as inline_store:
        inline_store.save(Checkpoint(run_id="t", state={"large": "y" * 200_000}))
        assert inline_store.load("t", fetch_blobs=False).state["large"] == "y" * 200_000


def test_secrets_are_scrubbed_before_values_are_offloaded(tmp_path: Path) -> None:
    """A secret inside a large tool output never reaches the blob store."""
    secret = "sk-canary-4f1d2c3b5a69788"
    secrets = safepoint.Secrets().add("KEY", secret)
    with safepoint.open_store(f"sqlite:///{tmp_path / 's.db'}", secrets=secrets) as store:
        big = output(5, 300_000)
        cp = Checkpoint(run_id="s")
        cp.messages.append({"role": "tool", "content": big[:1000] + secret + big})
        store.save(cp)
        assert store.load("s").messages[0]["content"] == big[:1000] + "[SECRET:KEY]" + big
        assert store.load("s", resolve_secrets=True).messages[0]["content"] == cp.messages[0]["content"]
    for path in (tmp_path / "s.db.blobs").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes()


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store several processes can open by URL: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'gc.db'}"
        return
    dsn = require_postgres()
    name = f"sp_test_gc_{os.getpid()}_{int(time.time())}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield dsn.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.crash
def test_gc_in_a_loop_while_four_processes_save_for_a_minute(shared_url: str, tmp_path: Path) -> None:
    """GC runs again and again while 4 processes save (new, repeated and shared blobs) and delete
    runs for 60 s: afterwards every checkpoint a process saw accepted loads, with its values."""
    stop_at = time.time() + 60
    journals = [tmp_path / f"journal-{n}.txt" for n in range(4)]
    workers = [
        subprocess.Popen(
            [sys.executable, str(HELPERS / "blob_saver.py"), shared_url, str(n), str(stop_at), str(j)]
        )
        for n, j in enumerate(journals)
    ]
    collections = 0
    deleted = 0
    with safepoint.open_store(shared_url) as store:
        while any(w.poll() is None for w in workers):
            deleted += store.collect_garbage().blobs_deleted
            collections += 1
            time.sleep(0.05)
        assert [w.returncode for w in workers] == [0, 0, 0, 0]
        deleted += store.collect_garbage().blobs_deleted
        checked = 0
        sys.path.insert(0, str(HELPERS))
        from blob_saver import expected_state  # noqa: PLC0415

        for journal in journals:
            lines = [line.split() for line in journal.read_text().splitlines()]
            deleted_runs = {run_id for first, run_id in lines if first == "deleted"}
            for run_id, step in lines:
                if run_id not in deleted_runs and run_id != "deleted":
                    assert store.load(run_id, int(step)).state == expected_state(run_id, int(step))
                    checked += 1
    assert collections > 20
    assert deleted > 0  # the blobs of deleted runs were collected
    assert checked > 100


def test_bytes_values_are_stored_as_blobs_and_come_back_as_bytes(opener: Callable[[], Store]) -> None:
    """bytes anywhere (state, pending action, inside messages) go to the blob store, whatever their size."""
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
    with opener() as store:
        cp = Checkpoint(run_id="binary", state={"image": png, "tiny": b"\x00"})
        cp.pending_action = {"tool": "screenshot", "result": png}
        cp.messages.append({"role": "tool", "content": "see attachment", "attachment": png})
        store.save(cp)
        follow = cp.next()
        follow.messages.append({"role": "assistant", "content": "got it"})
        store.save(follow)
    with opener() as store:
        loaded = store.load("binary")
        assert loaded.state == {"image": png, "tiny": b"\x00"}
        assert loaded.pending_action == {"tool": "screenshot", "result": png}
        assert loaded.messages[0]["attachment"] == png
        ref = store.load("binary", fetch_blobs=False).state["tiny"]
        assert ref["$blob"]["media_type"] == "application/octet-stream"
        assert store.fetch_blob(ref) == b"\x00"


def test_bytes_without_a_blob_store_are_refused_by_path() -> None:
    """With blobs=False, bytes are refused before any write, naming the path."""
    with safepoint.open_store("memory://", blobs=False) as store:
        with pytest.raises(safepoint.NotJSONCompatible, match=r"state\.b: bytes"):
            store.save(Checkpoint(run_id="z", state={"b": b"x"}))
        with pytest.raises(safepoint.NotFound):
            store.load("z")
