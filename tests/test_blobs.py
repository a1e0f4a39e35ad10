"""Blob stores: one behaviour suite run against every backend, then each backend's own details.

The S3 stores talk HTTP to moto's S3 server, started once per session in a
separate process on 127.0.0.1 (``blob_server.py``). To run them against a real
S3 or MinIO instead, set ``SAFEPOINT_TEST_S3=s3://bucket/prefix?endpoint_url=…&region=…``
(the bucket must exist; credentials come from boto3's usual chain; every test
works under a fresh sub-prefix and deletes what it wrote).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from blob_server import CREDENTIALS, REGION, start_s3_server
from safepoint.blobs import (
    BlobInfo,
    BlobRef,
    BlobStore,
    FileSystemBlobStore,
    MemoryBlobStore,
    S3BlobStore,
    blob_digest,
    is_blob_ref,
    open_blob_store,
)
from safepoint.blobs.base import decode_stored, encode_stored
from safepoint.errors import (
    BlobCorrupt,
    BlobError,
    BlobNotFound,
    InvalidArgument,
    InvalidURL,
    MissingExtra,
    SafepointError,
    StoreClosed,
)

MB = 1024 * 1024
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
BACKENDS = ["memory", "filesystem", "filesystem+zstd", "s3", "s3+zstd"]
# Stores whose objects outlive the store object: other processes, a crash, a second opening see them.
DURABLE_BACKENDS = [name for name in BACKENDS if name != "memory"]
BAD_DIGESTS = [
    "../../etc/passwd",
    "",
    "A" * 64,
    "a" * 63,
    "a" * 65,
    "g" * 64,
    "0" * 62 + "/x",
    "0" * 63 + "\n",
    "../" + "0" * 61,
]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def text_like(size: int, seed: int = 0) -> bytes:
    """``size`` bytes of random hex: compresses to about half, like a typical tool output."""
    return random.Random(seed).randbytes((size + 1) // 2).hex().encode()[:size]


def noise(size: int, seed: int = 0) -> bytes:
    """``size`` random bytes: zstd cannot shrink them."""
    return random.Random(seed).randbytes(size)


# --- the S3 target: moto's server in a child process, or a real one named by the environment


@dataclass
class S3Target:
    """A bucket to test in and the options to reach it."""

    bucket: str
    base_prefix: str
    options: dict[str, Any]

    def client(self) -> Any:
        import boto3  # noqa: PLC0415  # only the S3 tests need it

        options = dict(self.options)
        region = options.pop("region", None)
        return boto3.session.Session().client("s3", region_name=region, **options)


@pytest.fixture(scope="session")
def s3_target() -> Iterator[S3Target]:
    """Moto's S3 server in its own process for the session (or ``SAFEPOINT_TEST_S3``)."""
    configured = os.environ.get("SAFEPOINT_TEST_S3")
    if configured:
        parts = urlsplit(configured)
        prefix = parts.path.lstrip("/")
        yield S3Target(parts.netloc, prefix + "/" if prefix else "", dict(parse_qsl(parts.query)))
        return
    server = start_s3_server()
    target = S3Target(
        "safepoint-test", "", {"endpoint_url": server.endpoint_url, "region": REGION, **CREDENTIALS}
    )
    client = target.client()
    client.create_bucket(Bucket=target.bucket)
    client.close()
    try:
        yield target
    finally:
        server.stop()


# --- one backend per parameter: how to open it, look inside it and alter it


class Backend:
    """A blob store location plus the test's view into the raw objects it holds."""

    name = ""
    durable = True

    def __init__(self, compress: bool) -> None:
        self.compress = compress
        self.opened: list[BlobStore] = []
        self.store = self.open()

    def open(self, compress: bool | None = None) -> BlobStore:
        """Another store over the same location (by default with this backend's compression)."""
        store = self._open(self.compress if compress is None else compress)
        self.opened.append(store)
        return store

    def _open(self, compress: bool) -> BlobStore:
        raise NotImplementedError

    def child_config(self, **extra: Any) -> str:
        """JSON a child process turns back into this store with ``open_blob_store``."""
        raise NotImplementedError

    def raw(self, digest: str) -> bytes:
        raise NotImplementedError

    def tamper(self, digest: str, stored: bytes) -> None:
        raise NotImplementedError

    def write_marker(self, digest: str) -> object:
        """Something that changes whenever the object under ``digest`` is written again."""
        raise NotImplementedError

    def object_names(self) -> list[str]:
        """Every object in the location, whatever its name (temp files included)."""
        raise NotImplementedError

    def requests(self) -> int:
        """Backend requests so far (S3 only; 0 elsewhere)."""
        return 0

    def close(self) -> None:
        for store in self.opened:
            store.close()


class MemoryBackend(Backend):
    name = "memory"
    durable = False

    def _open(self, compress: bool) -> BlobStore:
        if not self.opened:
            return MemoryBlobStore(compress=compress)
        if compress != self.compress:  # durable_backend keeps such tests off the memory store
            raise AssertionError("a memory store's objects live only in that one store")
        return self.store  # the only store over this location

    def _memory(self) -> MemoryBlobStore:
        assert isinstance(self.store, MemoryBlobStore)
        return self.store

    def raw(self, digest: str) -> bytes:
        return self._memory().raw(digest)

    def tamper(self, digest: str, stored: bytes) -> None:
        self._memory().tamper(digest, stored)

    def write_marker(self, digest: str) -> object:
        return [info for info in self.store.scan() if info.digest == digest]

    def object_names(self) -> list[str]:
        return [info.digest for info in self.store.scan()]


class FileSystemBackend(Backend):
    name = "filesystem"

    def __init__(self, root: Path, compress: bool) -> None:
        self.root = root
        super().__init__(compress)

    def _open(self, compress: bool) -> BlobStore:
        return FileSystemBlobStore(self.root, compress=compress)

    def child_config(self, **extra: Any) -> str:
        return json.dumps({"url": str(self.root), "options": {"compress": self.compress}, **extra})

    def path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest[2:4] / digest

    def raw(self, digest: str) -> bytes:
        return self.path(digest).read_bytes()

    def tamper(self, digest: str, stored: bytes) -> None:
        self.path(digest).write_bytes(stored)

    def write_marker(self, digest: str) -> object:
        stat = self.path(digest).stat()
        return (stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns)

    def object_names(self) -> list[str]:
        return sorted(path.name for path in self.root.rglob("*") if path.is_file())

    def temp_files(self) -> list[Path]:
        return sorted(self.root.glob("*/*/.tmp-*"))


class S3Backend(Backend):
    name = "s3"

    def __init__(self, target: S3Target, compress: bool) -> None:
        self.target = target
        self.prefix = f"{target.base_prefix}{uuid.uuid4().hex}/"
        self.client = target.client()
        self.sent: list[str] = []
        super().__init__(compress)

    def _open(self, compress: bool) -> BlobStore:
        store = S3BlobStore(self.target.bucket, prefix=self.prefix, compress=compress, **self.target.options)
        store.client.meta.events.register("before-call.s3", self._count)
        return store

    def _count(self, model: Any, **_: Any) -> None:
        self.sent.append(model.name)

    def child_config(self, **extra: Any) -> str:
        options = {**self.target.options, "compress": self.compress}
        return json.dumps({"url": f"s3://{self.target.bucket}/{self.prefix}", "options": options, **extra})

    def raw(self, digest: str) -> bytes:
        body: bytes = self.client.get_object(Bucket=self.target.bucket, Key=self.prefix + digest)[
            "Body"
        ].read()
        return body

    def tamper(self, digest: str, stored: bytes) -> None:
        self.client.put_object(Bucket=self.target.bucket, Key=self.prefix + digest, Body=stored)

    def write_marker(self, digest: str) -> object:
        head = self.client.head_object(Bucket=self.target.bucket, Key=self.prefix + digest)
        return (head["ETag"], head["LastModified"], self.sent.count("PutObject"))

    def object_names(self) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.target.bucket, Prefix=self.prefix
        )
        return sorted(item["Key"][len(self.prefix) :] for page in pages for item in page.get("Contents", ()))

    def requests(self) -> int:
        return len(self.sent)

    def close(self) -> None:
        super().close()
        for name in self.object_names():
            self.client.delete_object(Bucket=self.target.bucket, Key=self.prefix + name)
        self.client.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Each blob store kind in turn, over a fresh, empty location."""
    made = make_backend(request, tmp_path)
    yield made
    made.close()


@pytest.fixture(params=DURABLE_BACKENDS)
def durable_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Each blob store kind whose objects outlive the store object (all but memory)."""
    made = make_backend(request, tmp_path)
    yield made
    made.close()


def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    kind, _, codec = request.param.partition("+")
    compress = codec == "zstd"
    made: Backend
    if kind == "memory":
        made = MemoryBackend(compress)
    elif kind == "filesystem":
        made = FileSystemBackend(tmp_path / "state.db.blobs", compress)
    else:
        made = S3Backend(request.getfixturevalue("s3_target"), compress)
    return made


@pytest.fixture
def store(backend: Backend) -> BlobStore:
    return backend.store


# --- the behaviour suite: every backend


@pytest.mark.parametrize(
    "data",
    [b"", b"x", "héllo, wörld".encode(), text_like(10_000), noise(100_000), text_like(3 * MB)],
    ids=["empty", "one-byte", "utf8", "text-10k", "noise-100k", "text-3mb"],
)
def test_round_trip(store: BlobStore, data: bytes) -> None:
    """What is put comes back byte for byte, under the SHA-256 of the original bytes."""
    digest = store.put(data)
    assert digest == sha(data)
    assert store.exists(digest)
    assert store.get(digest) == data


def test_round_trip_50_mb(backend: Backend, store: BlobStore) -> None:
    """A 50 MB value round-trips intact (and a compressing store keeps it smaller)."""
    data = text_like(50 * MB, seed=50)
    digest = store.put(data)
    assert store.get(digest) == data
    stored_size = len(backend.raw(digest))
    if backend.compress:
        assert stored_size < len(data) * 0.7
    else:
        assert stored_size == len(data)


def test_put_of_existing_content_does_not_rewrite(backend: Backend, store: BlobStore) -> None:
    """A second put of the same bytes returns the digest without writing the object again."""
    data = text_like(200_000, seed=1)
    digest = store.put(data)
    before = backend.write_marker(digest)
    time.sleep(0.01)  # so a rewrite would show in a timestamp, not to measure anything
    assert store.put(data) == digest
    assert backend.open().put(data) == digest
    assert backend.write_marker(digest) == before


def test_same_bytes_twice_make_one_object(backend: Backend, store: BlobStore) -> None:
    """Deduplication: equal content is stored once, however often and by whichever store it is put."""
    data = b"the same tool output"
    assert store.put(data) == store.put(bytearray(data)) == backend.open().put(memoryview(data))
    assert backend.object_names() == [sha(data)]
    assert [info.digest for info in store.scan()] == [sha(data)]


def test_missing_digest_raises_blob_not_found(store: BlobStore) -> None:
    """A digest never stored is BlobNotFound (a LookupError) naming it; exists and delete say no."""
    digest = sha(b"never stored")
    with pytest.raises(BlobNotFound) as caught:
        store.get(digest)
    assert caught.value.digest == digest
    assert digest in str(caught.value)
    assert isinstance(caught.value, LookupError)
    assert not store.exists(digest)
    assert not store.delete(digest)


TAMPERINGS: dict[str, Callable[[bytes], bytes]] = {
    "flip-a-byte": lambda stored: stored[:100] + bytes([stored[100] ^ 0x01]) + stored[101:],
    "truncate": lambda stored: stored[: len(stored) // 2],
    "empty": lambda stored: b"",
    "append": lambda stored: stored + b"\n",
    "other-blob": lambda stored: zstandard.ZstdCompressor().compress(text_like(5_000, seed=99)),
}


@pytest.mark.parametrize("tampering", list(TAMPERINGS))
def test_altered_blob_raises_blob_corrupt(backend: Backend, store: BlobStore, tampering: str) -> None:
    """A blob altered in storage is refused on read with BlobCorrupt naming the digest."""
    digest = store.put(text_like(20_000, seed=2))
    backend.tamper(digest, TAMPERINGS[tampering](backend.raw(digest)))
    with pytest.raises(BlobCorrupt) as caught:
        store.get(digest)
    assert caught.value.digest == digest
    assert digest in str(caught.value)
    assert caught.value.run_id is None


@pytest.mark.parametrize("bad", BAD_DIGESTS)
def test_invalid_digest_is_refused_before_any_io(backend: Backend, store: BlobStore, bad: str) -> None:
    """A digest that is not 64 lowercase hex is InvalidArgument for every call, before any I/O."""
    requests = backend.requests()
    for call in (store.get, store.exists, store.delete):
        with pytest.raises(InvalidArgument, match="64 lowercase hex"):
            call(bad)
    assert backend.requests() == requests
    if isinstance(backend, FileSystemBackend):
        assert not backend.root.exists()  # nothing was created, opened or resolved


def test_non_str_digest_and_non_bytes_data_are_refused(store: BlobStore) -> None:
    """Bytes as a digest, or text as data, are InvalidArgument naming the type, not the value."""
    with pytest.raises(InvalidArgument, match="must be a str, got bytes"):
        store.get(b"0" * 64)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="must be bytes, got str"):
        store.put("secret text")  # type: ignore[arg-type]


def test_delete_is_idempotent(store: BlobStore) -> None:
    """Delete says True once, then False; the blob is gone for get, exists and scan."""
    digest = store.put(b"to be collected")
    assert store.delete(digest) is True
    assert store.delete(digest) is False
    assert not store.exists(digest)
    with pytest.raises(BlobNotFound):
        store.get(digest)
    assert list(store.scan()) == []
    assert store.put(b"to be collected") == digest  # and it can be stored again
    assert store.get(digest) == b"to be collected"


def test_scan_lists_exactly_what_was_put(backend: Backend, store: BlobStore) -> None:
    """Scan yields each stored blob once, in digest order, with its stored size and a UTC creation time."""
    before = datetime.now(UTC) - timedelta(seconds=5)
    values = [b"", b"a", text_like(5_000, seed=3), noise(7_000, seed=4), text_like(70_000, seed=5)]
    digests = {store.put(value) for value in values}
    store.put(values[2])
    after = datetime.now(UTC) + timedelta(seconds=5)
    infos = list(store.scan())
    assert [info.digest for info in infos] == sorted(digests)
    for info in infos:
        assert info.stored_size == len(backend.raw(info.digest))
        assert info.created_at.tzinfo is not None
        assert before <= info.created_at <= after
    removed = sha(values[0])
    store.delete(removed)
    assert [info.digest for info in store.scan()] == sorted(digests - {removed})


def test_compressed_and_plain_stores_read_each_other(durable_backend: Backend) -> None:
    """A store with compression reads what one without wrote, and the other way round."""
    backend = durable_backend
    zstd_store, plain_store = backend.open(compress=True), backend.open(compress=False)
    compressed = zstd_store.put(text_like(100_000, seed=6))
    plain = plain_store.put(text_like(100_000, seed=7))
    assert backend.raw(compressed).startswith(ZSTD_MAGIC)
    assert len(backend.raw(compressed)) < 70_000
    assert backend.raw(plain) == text_like(100_000, seed=7)
    assert plain_store.get(compressed) == text_like(100_000, seed=6)
    assert zstd_store.get(plain) == text_like(100_000, seed=7)


def test_values_that_look_compressed_round_trip(backend: Backend, store: BlobStore) -> None:
    """Raw values that start with the zstd magic, or are zstd frames, come back unchanged."""
    frame = zstandard.ZstdCompressor().compress(text_like(10_000, seed=8))
    lookalikes = [ZSTD_MAGIC, ZSTD_MAGIC + noise(1_000, seed=9), frame, frame + b"trailing", frame[:-4]]
    for value in lookalikes:
        digest = store.put(value)
        assert store.get(digest) == value
        if backend.durable:
            assert backend.open(compress=not backend.compress).get(digest) == value


def test_closed_store_refuses_calls(store: BlobStore) -> None:
    """After close (idempotent), every call raises StoreClosed."""
    digest = store.put(b"kept")
    store.close()
    store.close()
    calls: list[Callable[[], object]] = [
        lambda: store.put(b"more"),
        lambda: store.get(digest),
        lambda: store.exists(digest),
        lambda: store.delete(digest),
        lambda: list(store.scan()),
    ]
    for call in calls:
        with pytest.raises(StoreClosed):
            call()


def test_threads_putting_the_same_content(store: BlobStore, backend: Backend) -> None:
    """Eight threads putting one value at once all succeed and leave one intact object."""
    data = text_like(2 * MB, seed=10)
    results: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        try:
            results.append(store.put(data))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert results == [sha(data)] * 8
    assert backend.object_names() == [sha(data)]
    assert store.get(sha(data)) == data


# --- real processes: concurrent writers and SIGKILL in the middle of a write

PUT_ONCE = """
import json, random, sys
from safepoint.blobs import open_blob_store
config = json.loads(sys.argv[1])
data = random.Random(config["seed"]).randbytes(config["size"] // 2).hex().encode()
store = open_blob_store(config["url"], **config["options"])
print("ready", flush=True)
sys.stdin.readline()
print(store.put(data), flush=True)
store.close()
"""

PUT_FOREVER = """
import hashlib, json, random, sys
from safepoint.blobs import open_blob_store
config = json.loads(sys.argv[1])
store = open_blob_store(config["url"], **config["options"])
rng = random.Random(config["seed"])
while True:
    data = rng.randbytes(config["size"] // 2).hex().encode()
    print(hashlib.sha256(data).hexdigest(), flush=True)
    store.put(data)
"""


def spawn(script: str, config: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, config],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_processes_putting_the_same_content(durable_backend: Backend) -> None:
    """Four processes putting one 8 MB value at the same moment all succeed; one intact object remains."""
    backend = durable_backend
    size = 8 * MB
    children = [spawn(PUT_ONCE, backend.child_config(seed=11, size=size)) for _ in range(4)]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
        for child in children:  # release them together
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        outputs = [child.communicate(timeout=120)[0].strip() for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    data = random.Random(11).randbytes(size // 2).hex().encode()
    assert [child.returncode for child in children] == [0] * 4
    assert outputs == [sha(data)] * 4
    assert backend.object_names() == [sha(data)]  # no second copy, no temp file left behind
    assert backend.open().get(sha(data)) == data


def kill_during_a_write(backend: Backend, seed: int) -> list[str]:
    """Start a child putting 24 MB values in a loop, SIGKILL it mid-write; return the digests it began."""
    child = spawn(PUT_FOREVER, backend.child_config(seed=seed, size=24 * MB))
    assert child.stdout is not None
    try:
        begun = [child.stdout.readline().strip()]
        if isinstance(backend, FileSystemBackend):
            # A temp file exists only between the open and the rename of a write: kill right then.
            while not backend.temp_files() and child.poll() is None:
                time.sleep(0.001)
        else:
            begun.append(child.stdout.readline().strip())  # one put done, the next under way
            time.sleep(random.Random(seed).uniform(0.0, 0.3))
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    return begun + [line.strip() for line in child.stdout if line.strip()]


@pytest.mark.crash
def test_sigkill_mid_write_leaves_no_partial_blob(durable_backend: Backend) -> None:
    """A writer SIGKILLed mid-put leaves at most a temp file: nothing partial under any digest."""
    backend = durable_backend
    for attempt in range(5):
        begun = kill_during_a_write(backend, seed=attempt)
        fresh = backend.open()
        listed = [info.digest for info in fresh.scan()]
        assert set(listed) <= set(begun)
        for digest in listed:
            fresh.get(digest)  # verifies the SHA-256: raises BlobCorrupt if anything is partial
        assert all(len(name) == 64 for name in backend.object_names() if not name.startswith(".tmp-"))
        in_flight = begun[-1]
        if isinstance(backend, FileSystemBackend) and backend.temp_files():
            assert not fresh.exists(in_flight)
            with pytest.raises(BlobNotFound):
                fresh.get(in_flight)
            break
        if not isinstance(backend, FileSystemBackend):
            break
    if isinstance(backend, FileSystemBackend):
        leftovers = backend.temp_files()
        assert leftovers, "five kills and not one caught a write in progress"
        fresh = backend.open()
        assert isinstance(fresh, FileSystemBlobStore)
        assert fresh.sweep_temp(older_than=timedelta(hours=1)) == 0  # young: may be a live write
        assert fresh.sweep_temp(older_than=timedelta(0)) == len(leftovers)
        assert backend.temp_files() == []
        assert {info.digest for info in fresh.scan()} == set(listed)


# --- blob references


@given(
    data=st.binary(max_size=2_000),
    media_type=st.sampled_from(["application/octet-stream", "text/plain; charset=utf-8", "image/png"]),
)
def test_blob_ref_json_round_trip(data: bytes, media_type: str) -> None:
    """A reference survives to_json/from_json exactly, through real JSON text too."""
    ref = BlobRef.of(data, media_type)
    assert ref == BlobRef(sha(data), len(data), media_type)
    assert ref.to_json() == {"$blob": {"sha256": sha(data), "size": len(data), "media_type": media_type}}
    assert BlobRef.from_json(json.loads(json.dumps(ref.to_json()))) == ref
    assert is_blob_ref(ref.to_json())


@pytest.mark.parametrize("obj", [None, 1, "x", [], {}, {"blob": 1}, {"sha256": "0" * 64}, [{"$blob": {}}]])
def test_from_json_returns_none_for_other_values(obj: object) -> None:
    """Values that are not blob references parse to None and are not blob references."""
    assert BlobRef.from_json(obj) is None
    assert not is_blob_ref(obj)


GOOD_BODY = {"sha256": "0" * 64, "size": 3, "media_type": "text/plain"}


@pytest.mark.parametrize(
    "obj",
    [
        {"$blob": None},
        {"$blob": "0" * 64},
        {"$blob": GOOD_BODY, "other": 1},
        {"$blob": {**GOOD_BODY, "sha256": "../../etc/passwd"}},
        {"$blob": {**GOOD_BODY, "sha256": "A" * 64}},
        {"$blob": {**GOOD_BODY, "size": -1}},
        {"$blob": {**GOOD_BODY, "size": "3"}},
        {"$blob": {**GOOD_BODY, "size": True}},
        {"$blob": {**GOOD_BODY, "media_type": ""}},
        {"$blob": {**GOOD_BODY, "media_type": "text/plain\n"}},
        {"$blob": {**GOOD_BODY, "media_type": 7}},
        {"$blob": {"sha256": "0" * 64, "size": 3}},
        {"$blob": {**GOOD_BODY, "encoding": "zstd"}},
    ],
)
def test_malformed_blob_reference_is_invalid_argument(obj: object) -> None:
    """Something shaped like a blob reference but wrong is InvalidArgument, never None."""
    with pytest.raises(InvalidArgument):
        BlobRef.from_json(obj)
    assert not is_blob_ref(obj)


def test_blob_ref_is_frozen_and_validated() -> None:
    """BlobRef refuses bad fields at construction and cannot be changed afterwards."""
    ref = BlobRef("0" * 64, 3)
    assert ref.media_type == "application/octet-stream"
    with pytest.raises(AttributeError):
        ref.size = 4  # type: ignore[misc]
    with pytest.raises(InvalidArgument):
        BlobRef("0" * 64, -1)
    with pytest.raises(InvalidArgument):
        BlobRef("not a digest", 1)
    assert blob_digest(b"abc") == sha(b"abc")


# --- the stored framing


@given(data=st.binary(max_size=5_000) | st.builds(lambda tail: ZSTD_MAGIC + tail, st.binary(max_size=200)))
def test_stored_framing_round_trips_either_way(data: bytes) -> None:
    """Whatever the bytes, with or without compression, decoding what was stored gives them back."""
    for compress in (False, True):
        stored = encode_stored(data, compress=compress)
        assert len(stored) <= len(data)
        assert decode_stored(sha(data), stored) == data


def test_compression_is_used_only_when_it_saves_space() -> None:
    """Compressible values are stored as a zstd frame; tiny or random ones are stored as they are."""
    assert encode_stored(text_like(10_000), compress=True).startswith(ZSTD_MAGIC)
    assert encode_stored(b"short", compress=True) == b"short"
    assert encode_stored(noise(10_000), compress=True) == noise(10_000)
    assert encode_stored(text_like(10_000), compress=False) == text_like(10_000)


# --- open_blob_store


def test_open_blob_store_file_urls_and_plain_paths(tmp_path: Path) -> None:
    """file:///abs/path and plain paths open a filesystem store; compress comes from query or keyword."""
    plain = open_blob_store(str(tmp_path / "a"))
    assert isinstance(plain, FileSystemBlobStore)
    assert (plain.root, plain.compress) == (tmp_path / "a", False)
    by_url = open_blob_store(f"file://{tmp_path}/b%20c?compress=true")
    assert isinstance(by_url, FileSystemBlobStore)
    assert (by_url.root, by_url.compress) == (tmp_path / "b c", True)
    keyword = open_blob_store(f"file://localhost{tmp_path}/d?compress=true", compress=False)
    assert isinstance(keyword, FileSystemBlobStore)
    assert keyword.compress is False
    relative = open_blob_store("state.db.blobs", compress=True)
    assert isinstance(relative, FileSystemBlobStore)
    assert relative.root == Path("state.db.blobs")


def test_open_blob_store_memory() -> None:
    """memory:// opens a memory store."""
    store = open_blob_store("memory://?compress=1")
    assert isinstance(store, MemoryBlobStore)
    assert store.compress is True
    assert store.get(store.put(b"x")) == b"x"


def test_open_blob_store_s3_url(s3_target: S3Target) -> None:
    """s3://bucket/prefix?endpoint_url=…&region=… opens an S3 store keyed under prefix/."""
    options = dict(s3_target.options)
    query = "&".join(f"{name}={options.pop(name)}" for name in ("endpoint_url", "region") if name in options)
    prefix = f"{s3_target.base_prefix}{uuid.uuid4().hex}"
    store = open_blob_store(f"s3://{s3_target.bucket}/{prefix}?{query}&compress=true", **options)
    try:
        assert isinstance(store, S3BlobStore)
        assert (store.bucket, store.prefix, store.compress) == (s3_target.bucket, prefix + "/", True)
        digest = store.put(b"from a URL")
        assert store.key_for(digest) == f"{prefix}/{digest}"
        assert store.get(digest) == b"from a URL"
        assert store.delete(digest)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("", {}),
        ("ftp://host/blobs", {}),
        ("sqlite:///state.db", {}),
        ("file://otherhost/blobs", {}),
        ("file://relative/blobs", {}),
        ("file:///abs?bogus=1", {}),
        ("file:///abs?compress=maybe", {}),
        ("file:///abs", {"endpoint_url": "http://x"}),
        ("/abs/path", {"bogus": 1}),
        ("memory://somewhere", {}),
        ("s3://", {}),
        ("s3:///prefix", {}),
        ("s3://key:secret@bucket/prefix", {}),
        ("s3://bucket:9000/prefix", {}),
        ("s3://bucket/prefix?acl=public", {}),
    ],
)
def test_open_blob_store_refuses_bad_urls(url: str, options: dict[str, Any]) -> None:
    """Unknown schemes, malformed URLs and unknown options are InvalidURL (an InvalidArgument)."""
    with pytest.raises(InvalidURL) as caught:
        open_blob_store(url, **options)
    assert isinstance(caught.value, InvalidArgument)
    assert "secret" not in str(caught.value)


# --- S3 specifics


def test_importing_blobs_does_not_import_boto3() -> None:
    """Users without the s3 extra never import boto3: only creating an S3 store does."""
    script = (
        "import sys, safepoint, safepoint.blobs; print('boto3' in sys.modules, 'botocore' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "False"]


def test_s3_store_without_boto3_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without boto3 installed, creating an S3 store is MissingExtra (an InvalidArgument) naming the extra."""
    for name in ("boto3", "botocore", "botocore.exceptions"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(InvalidArgument, match=r"pip install 'safepoint\[s3\]'") as caught:
        S3BlobStore("some-bucket")
    assert isinstance(caught.value, MissingExtra)
    assert caught.value.extra == "s3"


def test_s3_client_or_client_options_not_both(s3_target: S3Target) -> None:
    """A ready client and options to build one are refused together; a given client is left open."""
    client = s3_target.client()
    with pytest.raises(InvalidArgument, match="not both"):
        S3BlobStore(s3_target.bucket, client=client, region="eu-west-1")
    store = S3BlobStore(s3_target.bucket, prefix=f"{uuid.uuid4().hex}/", client=client)
    store.close()
    client.list_objects_v2(Bucket=s3_target.bucket, MaxKeys=1)  # still usable
    client.close()


class RacingClient:
    """Wraps an S3 client: HEAD always says "missing", as if another writer were racing this one."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.put_calls: list[dict[str, Any]] = []

    def head_object(self, **params: Any) -> Any:
        from botocore.exceptions import ClientError  # noqa: PLC0415

        raise ClientError(
            {"Error": {"Code": "404"}, "ResponseMetadata": {"HTTPStatusCode": 404}}, "HeadObject"
        )

    def put_object(self, **params: Any) -> Any:
        self.put_calls.append({name: value for name, value in params.items() if name != "Body"})
        return self._client.put_object(**params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class NoConditionalPutsClient(RacingClient):
    """Wraps an S3 client like a server that does not implement If-None-Match on PUT."""

    def put_object(self, **params: Any) -> Any:
        from botocore.exceptions import ClientError  # noqa: PLC0415

        if "IfNoneMatch" in params:
            self.put_calls.append({"refused": True})
            error = {"Error": {"Code": "NotImplemented"}, "ResponseMetadata": {"HTTPStatusCode": 501}}
            raise ClientError(error, "PutObject")
        return super().put_object(**params)


def test_s3_conditional_put_lost_race_is_success(s3_target: S3Target) -> None:
    """When another writer created the key first, the server's 412 to If-None-Match counts as stored."""
    client = RacingClient(s3_target.client())
    store = S3BlobStore(s3_target.bucket, prefix=f"{s3_target.base_prefix}{uuid.uuid4().hex}/", client=client)
    try:
        digest = store.put(b"first writer")
        real = client._client  # HEAD is faked: read the object's metadata through the real client
        before = real.head_object(Bucket=store.bucket, Key=store.key_for(digest))
        assert store.put(b"first writer") == digest  # HEAD lies, so this put really races
        assert [call["IfNoneMatch"] for call in client.put_calls] == ["*", "*"]
        after = real.head_object(Bucket=store.bucket, Key=store.key_for(digest))
        assert (after["ETag"], after["LastModified"]) == (before["ETag"], before["LastModified"])
        real.delete_object(Bucket=store.bucket, Key=store.key_for(digest))
    finally:
        store.close()
        client._client.close()


def test_s3_falls_back_to_plain_puts_without_conditional_support(s3_target: S3Target) -> None:
    """A server answering NotImplemented to If-None-Match still gets the blob, by a plain put."""
    client = NoConditionalPutsClient(s3_target.client())
    store = S3BlobStore(s3_target.bucket, prefix=f"{s3_target.base_prefix}{uuid.uuid4().hex}/", client=client)
    try:
        digest = store.put(b"stored anyway")
        assert store.get(digest) == b"stored anyway"
        assert client.put_calls[0] == {"refused": True}
        assert "IfNoneMatch" not in client.put_calls[1]
        store.put(b"second value")
        assert len(client.put_calls) == 3  # it remembered: no second refused attempt
        for info in list(store.scan()):
            store.delete(info.digest)
    finally:
        store.close()
        client._client.close()


def test_s3_errors_are_blob_errors_with_the_cause(s3_target: S3Target) -> None:
    """A missing bucket is a BlobError (not BlobNotFound) chaining botocore's error."""
    store = S3BlobStore("safepoint-no-such-bucket", **s3_target.options)
    try:
        with pytest.raises(BlobError) as caught:
            store.get(sha(b"x"))
        assert not isinstance(caught.value, BlobNotFound)
        from botocore.exceptions import ClientError  # noqa: PLC0415

        assert isinstance(caught.value.__cause__, ClientError)
        with pytest.raises(BlobError):
            store.put(b"x")
        with pytest.raises(BlobError):
            list(store.scan())
    finally:
        store.close()


def test_s3_unreachable_endpoint_is_a_blob_error() -> None:
    """No server at the endpoint: BlobError chaining the connection error, without the data."""
    from botocore.config import Config  # noqa: PLC0415

    config = Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=2)
    store = S3BlobStore(
        "safepoint-test", endpoint_url="http://127.0.0.1:9", region=REGION, config=config, **CREDENTIALS
    )
    try:
        with pytest.raises(BlobError) as caught:
            store.put(b"a value that must not appear in the error")
        assert isinstance(caught.value, SafepointError)
        assert "must not appear" not in str(caught.value)
        assert caught.value.__cause__ is not None
    finally:
        store.close()


def test_s3_scan_skips_keys_that_are_not_blobs(s3_target: S3Target) -> None:
    """Other keys under the prefix (nested, misnamed) are not listed as blobs."""
    backend = S3Backend(s3_target, compress=False)
    try:
        digest = backend.store.put(b"a blob")
        for key in ("README", f"nested/{digest}", digest.upper(), digest + ".bak"):
            backend.client.put_object(Bucket=s3_target.bucket, Key=backend.prefix + key, Body=b"x")
        assert [info.digest for info in backend.store.scan()] == [digest]
    finally:
        backend.close()


# --- filesystem specifics


def test_filesystem_layout_and_lazy_root(tmp_path: Path) -> None:
    """Nothing is created until the first put; blobs live at ab/cd/<digest> under the root."""
    root = tmp_path / "state.db.blobs"
    store = FileSystemBlobStore(root)
    assert list(store.scan()) == []
    assert not store.exists(sha(b"x"))
    assert not root.exists()
    digest = store.put(b"x")
    assert store.path_for(digest) == root / digest[:2] / digest[2:4] / digest
    assert store.path_for(digest).read_bytes() == b"x"


def test_filesystem_scan_ignores_foreign_and_misplaced_files(tmp_path: Path) -> None:
    """Scan lists only digest-named files in their own fan-out directory."""
    store = FileSystemBlobStore(tmp_path)
    digest = store.put(b"real")
    other = sha(b"misplaced")
    (tmp_path / "README").write_text("x")
    (tmp_path / "zz").mkdir()
    (tmp_path / digest[:2] / digest[2:4] / other).write_bytes(b"misplaced")
    (tmp_path / digest[:2] / digest[2:4] / (digest + ".bak")).write_bytes(b"x")
    assert [info.digest for info in store.scan()] == [digest]


def test_filesystem_scan_removes_only_stale_temp_files(tmp_path: Path) -> None:
    """Scan deletes temp files older than temp_file_grace and leaves young ones (live writes) alone."""
    store = FileSystemBlobStore(tmp_path, temp_file_grace=timedelta(minutes=10))
    digest = store.put(b"kept")
    leaf = store.path_for(digest).parent
    stale, young = leaf / ".tmp-1-stale", leaf / ".tmp-2-young"
    stale.write_bytes(b"half a blob")
    young.write_bytes(b"half another")
    an_hour_ago = time.time() - 3600
    os.utime(stale, (an_hour_ago, an_hour_ago))
    assert [info.digest for info in store.scan()] == [digest]
    assert not stale.exists()
    assert young.exists()


def test_filesystem_io_errors_are_blob_errors_with_the_cause(tmp_path: Path) -> None:
    """A root that is a file makes put a BlobError chaining the OSError; the message has the path."""
    root = tmp_path / "not-a-directory"
    root.write_text("x")
    store = FileSystemBlobStore(root)
    with pytest.raises(BlobError) as caught:
        store.put(b"some value")
    assert isinstance(caught.value.__cause__, OSError)
    assert str(root) in str(caught.value)
    assert "some value" not in str(caught.value)


def test_filesystem_blob_files_are_written_whole(tmp_path: Path) -> None:
    """After a put, the directory holds the blob and no temp file; the file matches the stored bytes."""
    store = FileSystemBlobStore(tmp_path, compress=True)
    data = text_like(1 * MB, seed=12)
    digest = store.put(data)
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert files == [store.path_for(digest)]
    assert zstandard.ZstdDecompressor().decompress(files[0].read_bytes()) == data


def test_stores_satisfy_the_protocol(tmp_path: Path) -> None:
    """Every bundled store is a BlobStore; BlobInfo is a frozen record."""
    assert isinstance(MemoryBlobStore(), BlobStore)
    assert isinstance(FileSystemBlobStore(tmp_path), BlobStore)
    info = BlobInfo("0" * 64, 1, datetime.now(UTC))
    with pytest.raises(AttributeError):
        info.stored_size = 2  # type: ignore[misc]
