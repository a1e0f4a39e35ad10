"""External blobs are uploaded before the save's transaction, and garbage collection cannot strand them."""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

import safepoint
from safepoint import Checkpoint, Store
from safepoint.blobs import FileSystemBlobStore, S3BlobStore
from safepoint.blobs.base import BlobStore

sys.path.insert(0, str(Path(__file__).parent))
from blob_server import CREDENTIALS, REGION, start_s3_server
from conftest_postgres import fresh_schema, require_postgres

# PostgreSQL ends a session idle inside a transaction after 5 s
# (idle_in_transaction_session_timeout, set per transaction in
# store/postgres/setup.sql); an upload that slow inside the save's
# transaction would always fail it.
IDLE_IN_TRANSACTION_TIMEOUT = 5.0


def big_text(seed: object) -> str:
    """A 128 KB value (twice the blob threshold), different per seed."""
    block = hashlib.sha256(str(seed).encode()).hexdigest()
    return block * 2048


class SlowFileSystemBlobs(FileSystemBlobStore):
    """A filesystem blob store whose uploads take longer than the idle-in-transaction timeout."""

    def put(self, data: bytes) -> str:
        time.sleep(IDLE_IN_TRANSACTION_TIMEOUT + 1)
        return super().put(data)


class CollectOnFirstPut:
    """Mixin: right after the first upload, another store collects garbage (grace 0) on the same blobs.

    That is the window the blob guard no longer covers (the upload is before
    the save's transaction): the GC sees the new blob unreferenced and deletes it.
    """

    gc_store: Store | None = None
    collected: list[str]

    def put(self, data: bytes) -> str:
        digest: str = super().put(data)  # type: ignore[misc]
        gc_store, self.gc_store = self.gc_store, None  # once: a re-put must not collect again
        if gc_store is not None:
            self.collected.extend(gc_store.collect_garbage(grace=0).deleted)
        return digest


class RacingFileSystemBlobs(CollectOnFirstPut, FileSystemBlobStore):
    pass


class RacingS3Blobs(CollectOnFirstPut, S3BlobStore):
    pass


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = start_s3_server()
    client = boto3.session.Session().client(
        "s3", endpoint_url=server.endpoint_url, region_name=REGION, **CREDENTIALS
    )
    client.create_bucket(Bucket="before-commit")
    client.close()
    try:
        yield server.endpoint_url
    finally:
        server.stop()


def _s3(cls: type[S3BlobStore], endpoint: str, prefix: str) -> Any:
    return cls("before-commit", prefix=prefix, endpoint_url=endpoint, region=REGION, **CREDENTIALS)


@pytest.fixture(params=["sqlite+filesystem", "postgresql+filesystem", "sqlite+s3"])
def racing(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Callable[[BlobStore], Store], BlobStore, CollectOnFirstPut]]:
    """(open a store on given blobs, plain blobs, racing blobs) over one blob location and one database."""
    kind = request.param
    if kind.endswith("s3"):
        endpoint = request.getfixturevalue("s3_endpoint")
        plain: BlobStore = _s3(S3BlobStore, endpoint, f"{tmp_path.name}/")
        racer: CollectOnFirstPut = _s3(RacingS3Blobs, endpoint, f"{tmp_path.name}/")
    else:
        plain = FileSystemBlobStore(tmp_path / "blobs")
        racer = RacingFileSystemBlobs(tmp_path / "blobs")
    racer.collected = []
    if kind.startswith("postgresql"):
        dsn = require_postgres()
        with fresh_schema(dsn) as schema:
            yield (lambda blobs: safepoint.open_store(dsn, schema=schema, blobs=blobs)), plain, racer
    else:
        url = f"sqlite:///{tmp_path / 'state.db'}"
        yield (lambda blobs: safepoint.open_store(url, blobs=blobs)), plain, racer


def test_a_blob_upload_slower_than_the_idle_timeout_does_not_fail_its_save(tmp_path: Path) -> None:
    """On PostgreSQL with external blobs, an upload longer than the idle-in-transaction timeout saves."""
    dsn = require_postgres()
    value = big_text("slow")
    with (
        fresh_schema(dsn) as schema,
        safepoint.open_store(dsn, schema=schema, blobs=SlowFileSystemBlobs(tmp_path / "blobs")) as store,
    ):
        cp = Checkpoint(run_id="slow")
        cp.messages.append({"role": "tool", "content": value})
        store.save(cp)
        nxt = cp.next()
        nxt.messages.append({"role": "assistant", "content": "done"})
        store.save(nxt)  # the session survived: nothing waited inside a transaction
        reader = safepoint.open_store(dsn, schema=schema, blobs=FileSystemBlobStore(tmp_path / "blobs"))
        with reader:
            loaded = reader.load("slow")
            assert loaded.step == 1
            assert loaded.messages[0]["content"] == value


def test_gc_between_a_blobs_upload_and_its_commit_cannot_strand_the_checkpoint(
    racing: tuple[Callable[[BlobStore], Store], BlobStore, CollectOnFirstPut],
) -> None:
    """A GC between a save's blob upload and its commit: the checkpoint still loads with its blob."""
    open_on, plain, racer = racing
    value = big_text("race")
    with open_on(plain) as gc_store, open_on(racer) as store:  # type: ignore[arg-type]
        racer.gc_store = gc_store
        cp = Checkpoint(run_id="race")
        cp.messages.append({"role": "tool", "content": value})
        cp.state = {"big": big_text("state")}
        store.save(cp)
        assert racer.gc_store is None  # the GC ran, inside the upload
        assert racer.collected, "the GC did not collect the freshly uploaded blobs"
        loaded = gc_store.load("race")
        assert loaded.messages[0]["content"] == value
        assert loaded.state == {"big": big_text("state")}
        # Committed and referenced now: a later GC keeps them.
        assert gc_store.collect_garbage(grace=0).blobs_deleted == 0
        assert gc_store.load("race").state == {"big": big_text("state")}
