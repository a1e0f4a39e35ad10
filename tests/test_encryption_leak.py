"""The encryption leak test: canaries in every field, message and blob, scrubbing off, every byte searched.

With ``scrubber=False`` nothing is redacted, so whatever keeps a canary out
of the stored bytes is the encryption alone. Canaries (``test_leak``'s: raw,
JSON-escaped, URL-encoded, base64 …) go into messages, state, cursors, the
pending action, labels, counter names, large tool outputs that go to the
blob store, and a quarantined run's last error. Afterwards the SQLite file,
its WAL and the blob folder; the S3 objects (moto's server); and a
``pg_dump`` of the PostgreSQL schema (bytea decoded, the blob table
included) are searched for each canary in each encoding: no hit at all.
The control: the same run with encryption off finds them, so the search
would see a leak.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import safepoint
from blob_server import CREDENTIALS, REGION, start_s3_server
from conftest_postgres import fresh_schema, require_postgres
from safepoint import Checkpoint, Keyring, Store, Worker
from safepoint.blobs.s3 import S3BlobStore
from test_leak import canaries, fill, hits, needles

RUNS, STEPS = 6, 14  # 84 checkpoints, 12 of them with a blob-sized tool output
KEYRING_TEXT = (
    "index:" + "A" * 43 + "= "  # fixed test keys: 32 bytes each, base64
    "k1:" + "B" * 43 + "="
)


def keyring() -> Keyring:
    return Keyring.from_text(KEYRING_TEXT)


def exercise(store: Store, secrets: dict[str, str]) -> None:
    """Canaries everywhere, a quarantined run with a canary in its error, every run loaded back."""
    rng = random.Random(5)
    for run in range(RUNS):
        cp = Checkpoint(run_id=f"leak-{run}")
        for _ in range(STEPS):
            fill(cp, secrets, rng)
            store.save(cp)
            cp = cp.next()
        assert store.load(cp.run_id).step == STEPS - 1
    poison = Checkpoint(run_id="poison", state={"x": 1})
    store.save(poison)
    store.enqueue("poison")
    canary = next(iter(secrets.values()))

    def handler(job: Any) -> None:
        raise ValueError(f"the tool said {canary}")

    # A poison run, as a worker quarantines it: the error's text holds a canary.
    Worker(store, handler, lease=5, poll=0.01, max_attempts=1).run(stop_when_idle=True)
    info = store.run("poison")
    assert info.status is safepoint.Status.FAILED
    assert info.last_error is not None
    assert canary in info.last_error
    assert [r.run_id for r in store.runs(labels={"where": "nowhere"}).items] == []


def sqlite_bytes(folder: Path) -> bytes:
    """Every file under ``folder``: the database, its WAL, the blob folder."""
    return b"".join(path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file())


@pytest.mark.parametrize("encrypted", [True, False], ids=["encrypted", "control"])
def test_no_canary_in_the_sqlite_file_wal_or_blob_files(tmp_path: Path, encrypted: bool) -> None:
    secrets = canaries()
    options: dict[str, Any] = {"scrubber": False, "wal_autocheckpoint": 0}  # the WAL keeps every page
    if encrypted:
        options["encryption"] = keyring()
    store = safepoint.open_store(f"sqlite:///{tmp_path}/state.db", **options)
    try:
        exercise(store, secrets)
        assert any((tmp_path / "state.db.blobs").rglob("*")), "the tool outputs went to the blob folder"
        assert (tmp_path / "state.db-wal").stat().st_size > 0
        found = hits(needles(secrets), sqlite_bytes(tmp_path))
    finally:
        store.close()
    if encrypted:
        assert found == []
    else:
        assert len(found) > 50  # the control: the search sees what is there


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, Any]]:
    server = start_s3_server()
    options = {"endpoint_url": server.endpoint_url, "region": REGION, **CREDENTIALS}
    import boto3  # noqa: PLC0415

    client = boto3.session.Session().client(
        "s3", region_name=REGION, endpoint_url=server.endpoint_url, **CREDENTIALS
    )
    client.create_bucket(Bucket="leak")
    try:
        yield {"client": client, "options": options}
    finally:
        client.close()
        server.stop()


@pytest.mark.parametrize("encrypted", [True, False], ids=["encrypted", "control"])
def test_no_canary_in_the_s3_objects(tmp_path: Path, s3: dict[str, Any], encrypted: bool) -> None:
    secrets = canaries()
    prefix = f"{'enc' if encrypted else 'plain'}/"
    blobs = S3BlobStore("leak", prefix=prefix, **s3["options"])
    options: dict[str, Any] = {"scrubber": False, "blobs": blobs}
    if encrypted:
        options["encryption"] = keyring()
    store = safepoint.open_store(f"sqlite:///{tmp_path}/state.db", **options)
    try:
        exercise(store, secrets)
    finally:
        store.close()
    client = s3["client"]
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="leak", Prefix=prefix).get("Contents", [])]
    assert keys, "the tool outputs went to S3"
    objects = b"".join(client.get_object(Bucket="leak", Key=key)["Body"].read() for key in keys)
    found = hits(needles(secrets), objects + "\n".join(keys).encode())
    if encrypted:
        assert found == []
        assert hits(needles(secrets), sqlite_bytes(tmp_path)) == []
    else:
        assert found


@pytest.mark.parametrize("encrypted", [True, False], ids=["encrypted", "control"])
def test_no_canary_in_a_pg_dump(encrypted: bool) -> None:
    dsn = require_postgres()
    pg_dump = shutil.which("pg_dump") or next(
        iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_dump"))), None
    )
    assert pg_dump is not None, "pg_dump is needed for the leak test"
    secrets = canaries()
    with fresh_schema(dsn) as schema:
        options: dict[str, Any] = {"schema": schema, "scrubber": False}
        if encrypted:
            options["encryption"] = keyring()
        store = safepoint.open_store(dsn, **options)
        try:
            exercise(store, secrets)
        finally:
            store.close()
        dump = subprocess.run(
            [str(pg_dump), "--data-only", "--schema", schema, dsn], check=True, capture_output=True
        ).stdout
    # bytea columns dump as hex (\x7b22…): decode them, or a leak there would go unseen.
    decoded = b"\n".join(bytes.fromhex(h.decode()) for h in re.findall(rb"\\\\x([0-9a-f]+)", dump))
    assert len(decoded) > 50_000
    found = hits(needles(secrets), dump + decoded)
    if encrypted:
        assert found == []
    else:
        assert len(found) > 50
