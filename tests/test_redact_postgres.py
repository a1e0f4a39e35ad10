"""Redaction on PostgreSQL: the value leaves every row, dump and S3 object; runs verify and resume.

Three configurations, 30 runs each: plain (blobs in the database), encrypted (a
keyring; blobs in the database) and plain with blobs on S3 (moto's server). Each
run holds one hostile value in its messages, state, pending action, a label, a
journal entry and blobs, raw, JSON-escaped and base64 (``redact_seed_pg``). After
``store.redact`` with that value: no form of it in ``pg_dump`` of the store's
schema, nor in any S3 object, nor in what loads; every run verifies and resumes.
A registered secret comes back on load where registered; a writer holding the
pre-redaction head gets ``Conflict`` from the one-statement save path and, reloaded,
does not write the value back. Fresh schemas on the shared server; no restart.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

import safepoint
from blob_server import CREDENTIALS, REGION, start_s3_server
from redact_seed_pg import (
    VALUE,
    b64,
    content,
    hits,
    holds_value,
    loaded_clean,
    resume,
    seed_run,
)
from safepoint import Keyring, Redaction, SecretRef, Secrets, Store
from safepoint.errors import Conflict
from safepoint.store.admin import verify_store
from save_queries import record_save_queries

RUNS = 30
THRESHOLD = 1024  # the seeded tool messages and journal pages (3 kB) go to blobs
BLOB_SIZE = 3000
PG_BIN = Path("/usr/lib/postgresql")


def pg_dump_tool() -> str:
    """pg_dump: on PATH, else the newest under /usr/lib/postgresql/N/bin (Debian's place)."""
    found = shutil.which("pg_dump")
    if found:
        return found
    for folder in sorted(PG_BIN.glob("*/bin"), key=lambda path: int(path.parent.name), reverse=True):
        if (folder / "pg_dump").is_file():
            return str(folder / "pg_dump")
    pytest.fail(f"pg_dump not found on PATH or under {PG_BIN}", pytrace=False)


def dump(dsn: str, schema: str) -> bytes:
    """The schema as ``pg_dump`` writes it (plain SQL: COPY text, bytea as hex)."""
    done = subprocess.run(
        [pg_dump_tool(), "--no-owner", "-n", schema, dsn], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = start_s3_server()
    try:
        yield server.endpoint_url
    finally:
        server.stop()


class Bucket:
    """A fresh bucket on moto's server: its blob URL and every object's bytes."""

    def __init__(self, endpoint: str) -> None:
        self.name = f"redact-{uuid.uuid4().hex[:10]}"
        self.client = boto3.session.Session().client(
            "s3", endpoint_url=endpoint, region_name=REGION, **CREDENTIALS
        )
        self.client.create_bucket(Bucket=self.name)
        self.url = f"s3://{self.name}/store?endpoint_url={endpoint}&region={REGION}"

    def objects(self) -> dict[str, bytes]:
        out = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.name):
            for item in page.get("Contents", []):
                out[item["Key"]] = self.client.get_object(Bucket=self.name, Key=item["Key"])["Body"].read()
        return out


def keyring() -> Keyring:
    return Keyring({"k1": uuid.uuid4().bytes * 2}, index_key=uuid.uuid4().bytes * 2)


@pytest.fixture
def opener(
    postgres_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Store]]:
    """Opens stores on this test's fresh schema (closed at the end)."""
    opened: list[Store] = []

    def open_one(**options: Any) -> Store:
        store = safepoint.open_store(postgres_dsn, schema=pg_schema, min_size=1, max_size=2, **options)
        opened.append(store)
        return store

    for name, value in {**CREDENTIALS, "region": REGION}.items():  # boto3 reads these for the store
        env = {"aws_access_key_id": "AWS_ACCESS_KEY_ID", "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY"}
        monkeypatch.setenv(env.get(name, "AWS_DEFAULT_REGION"), value)
    yield open_one
    for store in opened:
        store.close()


@pytest.mark.parametrize("config", ["plain", "encrypted", "s3"])
def test_redacted_value_leaves_dump_objects_and_loads(
    opener: Callable[..., Store],
    postgres_dsn: str,
    pg_schema: str,
    request: pytest.FixtureRequest,
    config: str,
) -> None:
    """30 seeded runs redacted: 0 forms of the value in pg_dump, in S3 objects and in what
    loads; every run verifies, has one audit record and resumes."""
    options: dict[str, Any] = {"blob_threshold": THRESHOLD}
    bucket = None
    if config == "encrypted":
        options["encryption"] = keyring()
    if config == "s3":
        bucket = Bucket(request.getfixturevalue("s3_endpoint"))
        options["blobs"] = bucket.url
    store = opener(**options)
    run_ids = [f"run-{n:02d}" for n in range(RUNS)]
    for run_id in run_ids:
        seed_run(store, run_id, blob_size=BLOB_SIZE)

    # The checks can fail: before the redaction the value is where each looks.
    assert loaded_clean(store, run_ids[0]) == [0, 1, 2, -1]
    before = dump(postgres_dsn, pg_schema)
    if config == "encrypted":
        assert hits(before) == 0  # sealed: only what loads shows it
    else:
        assert hits(before) > RUNS
    if bucket is not None:
        assert sum(hits(data) for data in bucket.objects().values()) >= RUNS

    done = store.redact(Redaction(values=[VALUE]))
    assert done.ok
    assert not done.left
    assert sorted(run.run_id for run in done.runs) == run_ids
    assert done.blobs_deleted >= RUNS  # each run's blob held the value and is gone

    after = dump(postgres_dsn, pg_schema)
    assert hits(after) == 0
    if bucket is not None:
        objects = bucket.objects()
        assert objects  # the redacted blobs are there, without the value
        assert {key: hits(data) for key, data in objects.items() if hits(data)} == {}
    report = verify_store(store)
    assert report.ok, report.failures[:3]
    assert report.checked == 3 * RUNS
    assert len(report.redactions) == RUNS
    fresh = opener(**options)  # no memory of the runs from before
    head = fresh.load(run_ids[0])
    assert head.state["raw"] == "[REDACTED:value-1]"
    assert head.labels == {"owner": "by [REDACTED:value-1]", "team": "red"}
    # Every run's loads on S3 are HTTP requests to moto: there its objects, read above, stand
    # for the loads of all but a few runs.
    for run_id in run_ids:
        if config != "s3" or run_id in run_ids[:3]:
            assert loaded_clean(fresh, run_id) == []
        assert [record.found for record in fresh.redactions(run_id)] == [done.runs[0].found]
        assert resume(fresh, run_id) == 3


def test_registered_secret_resolves_where_registered(opener: Callable[..., Store]) -> None:
    """Redacted as a registered secret, the value becomes a reference: a load with the
    registry gets it back in messages, state, pending action and journal; without, not."""
    store = opener(blob_threshold=THRESHOLD)
    seed_run(store, "kept", blob_size=BLOB_SIZE)
    originals = [content(store.load("kept", step)) for step in range(3)]
    entry = store.recorded_calls("kept")[0].result
    secrets = Secrets().add("DSR_TOKEN", VALUE)
    done = store.redact(Redaction(secrets=secrets))
    assert done.ok
    assert done.counts["secret:DSR_TOKEN"] > 0

    reader = opener(blob_threshold=THRESHOLD)
    assert loaded_clean(reader, "kept") == []
    for step, original in enumerate(originals):
        resolved = content(reader.load("kept", step, resolve_secrets=secrets))
        # Labels get markers at save and at redaction: the rest comes back as it was.
        assert resolved["labels"]["owner"] != original["labels"]["owner"]
        del resolved["labels"], original["labels"]
        assert resolved == original
    head = reader.load("kept", resolve_secrets=secrets)
    assert head.state["b64"] == b64(VALUE)
    assert reader.recorded_calls("kept", resolve_secrets=secrets)[0].result == entry
    assert reader.load("kept", 0).state["raw"] == SecretRef("DSR_TOKEN")  # unresolved: the reference
    assert verify_store(reader).ok


@pytest.fixture
def save_queries(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The query names each save in this test asked for, in order."""
    return record_save_queries(monkeypatch)


def test_live_writer_gets_conflict_and_does_not_bring_the_value_back(
    opener: Callable[..., Store], save_queries: list[list[str]]
) -> None:
    """A writer holding the head from before the redaction asks for save_next, which writes
    nothing, then the general way refuses with Conflict; reloaded, its save holds no value."""
    writer = opener(blob_threshold=THRESHOLD)
    seed_run(writer, "live", blob_size=BLOB_SIZE, calls=False)
    held = writer.load("live")
    assert holds_value(content(held))
    done = opener(blob_threshold=THRESHOLD).redact(Redaction(values=[VALUE]))
    assert [run.run_id for run in done.runs] == ["live"]

    stale = held.next()
    stale.messages.append({"role": "user", "content": "next question"})
    save_queries.clear()
    with pytest.raises(Conflict):
        writer.save(stale)
    assert save_queries[0][0] == "save_next"  # the one-statement path was tried first
    assert "run_head" in save_queries[0]  # and fell back to the general way, which refused
    assert writer.load("live").step == 2

    again = writer.load("live").next()
    again.messages.append({"role": "user", "content": "next question"})
    assert writer.save(again).step == 3
    assert loaded_clean(opener(), "live") == []
    report = verify_store(writer)
    assert report.ok, report.failures[:3]
