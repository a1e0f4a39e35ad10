"""A sealed blob put again with ``replace=True`` takes the place of what is stored, on every
bundled blob store — what ``encrypt_store`` and ``rekey_store`` rely on to seal a blob anew.

Found by the model-based test (``open_without_keyring`` then ``encrypt`` on SQLite with S3
blobs): S3's put was conditional (``If-None-Match``) even for a replace, so the server kept
the old object, encrypt reported the blob sealed, and every load of it then failed
(``BlobCorrupt``: plain text on an encrypted store). A rekey left blobs under the old key.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import safepoint
from blob_server import CREDENTIALS, REGION, start_s3_server
from safepoint import Checkpoint, Keyring
from safepoint.blobs.filesystem import FileSystemBlobStore
from safepoint.blobs.s3 import S3BlobStore
from safepoint.store.keys import encrypt_store, key_status, rekey_store

DIGEST = "ab" * 32


@pytest.fixture(scope="module")
def s3_options() -> Iterator[dict[str, Any]]:
    server = start_s3_server()
    options = {"endpoint_url": server.endpoint_url, "region": REGION, **CREDENTIALS}
    import boto3  # noqa: PLC0415

    client = boto3.session.Session().client(
        "s3", region_name=REGION, endpoint_url=server.endpoint_url, **CREDENTIALS
    )
    client.create_bucket(Bucket="replace")
    client.close()
    try:
        yield options
    finally:
        server.stop()


def _s3(options: dict[str, Any]) -> S3BlobStore:
    return S3BlobStore("replace", prefix=f"{uuid.uuid4().hex}/", **options)


@pytest.mark.parametrize("kind", ["files", "s3"])
def test_put_sealed_replaces_only_when_asked(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store: Any = (
        FileSystemBlobStore(tmp_path / "blobs")
        if kind == "files"
        else _s3(request.getfixturevalue("s3_options"))
    )
    try:
        store.put_sealed(DIGEST, b"first")
        store.put_sealed(DIGEST, b"second")  # idempotent: what is there stays
        assert store.get_sealed(DIGEST) == b"first"
        store.put_sealed(DIGEST, b"third", replace=True)
        assert store.get_sealed(DIGEST) == b"third"
    finally:
        store.close()


def _keyring_text() -> str:
    def key() -> str:
        return base64.b64encode(os.urandom(32)).decode()

    return f"index:{key()} k1:{key()}"


def test_encrypt_and_rekey_seal_s3_blobs_anew(tmp_path: Path, s3_options: dict[str, Any]) -> None:
    prefix = f"{uuid.uuid4().hex}/"
    url = f"sqlite:///{tmp_path / 'state.db'}"

    def opened(**options: Any) -> safepoint.Store:
        blobs = S3BlobStore("replace", prefix=prefix, **s3_options)
        return safepoint.open_store(url, blobs=blobs, blob_threshold=64, **options)

    big = "a long tool output " * 20
    with opened() as store:
        cp = Checkpoint(run_id="run")
        cp.messages.append({"role": "user", "content": big})
        store.save(cp)
        text = _keyring_text()
        assert encrypt_store(store, Keyring.from_text(text)).ok
    with opened(encryption=Keyring.from_text(text)) as store:
        assert store.load("run").messages[0]["content"] == big
        assert key_status(store).plaintext == 0
    rotated = f"{text} k2:{base64.b64encode(os.urandom(32)).decode()}"
    with opened(encryption=Keyring.from_text(rotated)) as store:
        assert rekey_store(store).ok
        assert len(key_status(store).by_data_key) == 1  # the blob too is under the new data key
        assert store.load("run").messages[0]["content"] == big
