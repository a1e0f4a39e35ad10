"""A PostgreSQL store with its blobs on S3, backed up and restored by the documented
procedure (docs/operations.md, "Backups") with the tools users run: ``pg_dump`` of the
store's schema (custom format), a copy of the bucket taken after the dump's snapshot,
``pg_restore`` into another database. ``safepoint verify`` of the restored store (the real
CLI, pointed at the copied bucket) is the check; the restored store holds every checkpoint
acknowledged before the dump began and resumes the runs; an encrypted store's dump and
bucket copy hold no key. Fresh databases on the shared server, dropped at the end; S3 is
moto's server; no server is restarted.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import boto3
import psycopg
import pytest
from psycopg import sql

import safepoint
from backup_runs import (
    BLOB_THRESHOLD,
    files_holding,
    finished_right,
    key_material,
    keyring_text,
    tool_output,
    work,
)
from blob_server import CREDENTIALS, REGION, start_s3_server
from conftest_postgres import require_postgres
from safepoint import Checkpoint, Keyring
from safepoint_exe import sp

SCHEMA = "agents"  # a schema other than the default, as a shared database has
PG_BIN_FALLBACK = Path("/usr/lib/postgresql")


def pg_tool(name: str) -> str:
    """A PostgreSQL client program: on PATH, else in ``pg_config --bindir``, else in the
    newest /usr/lib/postgresql/N/bin (Debian keeps them off PATH)."""
    found = shutil.which(name)
    if found:
        return found
    pg_config = shutil.which("pg_config")
    if pg_config:
        bindir = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True).stdout
        if (Path(bindir.strip()) / name).is_file():
            return str(Path(bindir.strip()) / name)
    versions = sorted(PG_BIN_FALLBACK.glob("*/bin"), key=lambda path: int(path.parent.name), reverse=True)
    for folder in versions:
        if (folder / name).is_file():
            return str(folder / name)
    pytest.fail(f"{name} not found on PATH, in pg_config --bindir or under {PG_BIN_FALLBACK}", pytrace=False)


def database_url(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{name}", query=""))


@pytest.fixture
def databases() -> Iterator[tuple[str, str]]:
    """Two fresh databases (the live one and the restore target), dropped even on failure."""
    dsn = require_postgres()
    names = [f"sp_backup_{kind}_{uuid.uuid4().hex[:12]}" for kind in ("live", "restored")]
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield database_url(dsn, names[0]), database_url(dsn, names[1])
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for name in names:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    server = start_s3_server()
    try:
        yield server.endpoint_url
    finally:
        server.stop()


def copy_bucket(client: object, source: str, target: str) -> int:
    """Copy every object of ``source`` into ``target`` (what ``aws s3 sync`` does); how many."""
    copied = 0
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=source)  # type: ignore[attr-defined]
    for page in pages:
        for item in page.get("Contents", []):
            client.copy_object(  # type: ignore[attr-defined]
                Bucket=target, Key=item["Key"], CopySource={"Bucket": source, "Key": item["Key"]}
            )
            copied += 1
    return copied


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_pg_dump_restore_and_bucket_copy_verify_and_resume(
    databases: tuple[str, str], s3: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encrypted: bool
) -> None:
    """pg_dump -n SCHEMA -Fc while a writer saves, then the bucket copied, then pg_restore into
    a new database: safepoint verify passes on it, it holds every checkpoint acknowledged
    before the dump began, and its half-done runs resume to the uninterrupted answer."""
    live_db, restored_db = databases
    for name, value in {**CREDENTIALS, "region": REGION}.items():  # boto3 and the CLI read these
        env = {"aws_access_key_id": "AWS_ACCESS_KEY_ID", "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY"}
        monkeypatch.setenv(env.get(name, "AWS_DEFAULT_REGION"), value)
    bucket = f"live-{uuid.uuid4().hex[:8]}"
    client = boto3.session.Session().client("s3", endpoint_url=s3, region_name=REGION, **CREDENTIALS)
    client.create_bucket(Bucket=bucket)
    client.create_bucket(Bucket=f"{bucket}-copy")
    blobs, blobs_copy = (f"s3://{name}/store?endpoint_url={s3}" for name in (bucket, f"{bucket}-copy"))
    options: dict[str, object] = {"blob_threshold": BLOB_THRESHOLD, "blobs": blobs}
    key_args: list[str] = []
    secrets: list[bytes] = []
    if encrypted:
        text, raw = keyring_text()
        keys = tmp_path / "keys.txt"
        keys.write_text(text)
        keys.chmod(0o600)
        options["encryption"] = Keyring.from_file(keys)
        key_args, secrets = ["--key-file", str(keys)], key_material(raw)
    run_ids = [f"run-{n}" for n in range(3)]
    live = safepoint.open_store(f"{live_db}?schema={SCHEMA}", **options)  # type: ignore[arg-type]
    for n, run_id in enumerate(run_ids):
        work(live, run_id, upto=2 + n)  # 2 to 4 of 6 steps done

    ledger: list[tuple[str, int]] = []  # saves acknowledged, outside the database
    stop, errors = threading.Event(), []

    def writer() -> None:  # an agent that keeps saving through the dump and the bucket copy
        try:
            step = 0
            while not stop.is_set() or step < 3:
                value = tool_output("busy", step)
                live.save(Checkpoint(run_id="busy", step=step, state={"value": value}))
                ledger.append(("busy", step))
                step += 1
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    while len(ledger) < 3:
        stop.wait(0.02)
    acknowledged = [*ledger, *((run_id, step) for run_id in run_ids for step in _steps(live, run_id))]
    dump = tmp_path / "store.dump"
    try:
        # 1. The dump: one snapshot of the schema, taken as pg_dump starts. --compress=0 only so
        # that this test can look for key bytes in it; users keep the default compression.
        pg_dump = [pg_tool("pg_dump"), "--format=custom", "--compress=0", f"--schema={SCHEMA}"]
        subprocess.run([*pg_dump, f"--file={dump}", f"--dbname={live_db}"], check=True, timeout=120)
        # 2. The bucket, after the dump's snapshot: every blob the dump references is there.
        copied = copy_bucket(client, bucket, f"{bucket}-copy")
    finally:
        stop.set()
        thread.join(timeout=60)
        live.close()
    assert not errors, errors
    assert copied > 0

    # 3. Into another database (here: a new one on the same server).
    restore = [pg_tool("pg_restore"), "--exit-on-error", "--no-owner", f"--dbname={restored_db}", str(dump)]
    subprocess.run(restore, check=True, timeout=120)

    # 4. The check: safepoint verify of the restored store, its blobs in the bucket's copy.
    restored_url = f"{restored_db}?schema={SCHEMA}"
    checked = sp(tmp_path, "verify", "--json", "--store", restored_url, "--blobs", blobs_copy, *key_args)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    assert report["failures"] == []
    assert report["checked"] >= len(acknowledged)
    if not encrypted:  # the check reads the blobs: without the bucket's copy it fails, naming one
        blind = sp(tmp_path, "verify", "--json", "--store", restored_url)
        assert blind.returncode == 1
        assert {failure["error"] for failure in json.loads(blind.stdout)["failures"]} == {"BlobNotFound"}

    restored_options = {**options, "blobs": blobs_copy}
    with safepoint.open_store(restored_url, **restored_options) as restored:  # type: ignore[arg-type]
        for run_id, step in acknowledged:
            loaded = restored.load(run_id, step)
            if run_id == "busy":
                assert loaded.state["value"] == tool_output("busy", step)
        for run_id in run_ids:
            work(restored, run_id, upto=6)
        assert all(finished_right(restored, run_id) for run_id in run_ids)
    if encrypted:
        objects = tmp_path / "objects"
        objects.mkdir()
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=f"{bucket}-copy"):
            for n, item in enumerate(page.get("Contents", [])):
                body = client.get_object(Bucket=f"{bucket}-copy", Key=item["Key"])["Body"].read()
                (objects / f"{n}").write_bytes(body)
        assert files_holding(tmp_path, secrets) == [str(keys)]  # the key file only: not dump, not bucket
        assert files_holding(objects, [tool_output("run-0", 0).encode()]) == []  # blobs stay sealed
        assert tool_output("run-0", 0).encode() not in dump.read_bytes()
        keyless = sp(tmp_path, "verify", "--store", restored_url, "--blobs", blobs_copy)
        assert keyless.returncode != 0
        assert "Traceback" not in keyless.stderr
    client.close()


def _steps(store: safepoint.Store, run_id: str) -> list[int]:
    return [info.step for info in store.history(run_id)]
