"""``safepoint tenant erase`` / ``erase_tenant``: everything of one tenant deleted, its data keys
first, resumable after a SIGKILL at any step, every other tenant untouched byte for byte.

PostgreSQL: tenants a (keyring A), b (keyring B) and c (plain) share a schema; erasing a
leaves 0 rows of a in every tenant table (counted with raw SQL as the superuser, whom
row-level security does not filter) and b's and c's rows exactly as they were. SQLite: a
tenant is a file; erasing it removes the file, its -wal/-shm and its blob folder, and
leaves every other file as it was.

The kills: a child process runs ``erase_tenant`` with a progress callback that SIGKILLs
its own process right after the N-th step has committed (the data keys, a page of runs,
a page of blob rows, the blob folder …); each next attempt dies one step further along;
then the real ``safepoint tenant erase`` finishes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import safepoint
from safepoint import Redaction
from safepoint.errors import EncryptedStore, InvalidArgument, StoreNotFound
from safepoint.store.admin import erase_tenant, tenant_held
from safepoint.store.erasing import Erasure
from safepoint.store.ops.erasing import Held
from safepoint.store.postgres.roles import grant_statements
from safepoint.store.tenants import tenant_path
from safepoint_exe import sp
from tenant_seed import BLOB_THRESHOLD, fill, filled_right, keyring, tenant_rows

A, B = keyring(1), keyring(2)

# The child: erase_tenant(URL, TENANT, schema=…) killed by SIGKILL right after its KILL_AT-th step.
CHILD = """
import json, os, signal, sys
from safepoint.store.admin import erase_tenant
url, tenant, options, kill_at = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
steps = []
def progress(step, count):
    steps.append(step)
    print(step, count, flush=True)
    if len(steps) == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
erase_tenant(url, tenant, progress=progress, **options)
print("finished", flush=True)
"""


def killed_erase(url: str, tenant: str, options: dict[str, str], kill_at: int) -> list[str]:
    """Run the child; it must die by SIGKILL right after its ``kill_at``-th step. Its steps."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url, tenant, json.dumps(options), str(kill_at)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr
    return [line.split()[0] for line in done.stdout.splitlines()]


def pg_open(dsn: str, schema: str, tenant: str, ring: object = None) -> safepoint.Store:
    extra = {} if ring is None else {"encryption": ring}
    return safepoint.open_store(
        dsn, schema=schema, tenant=tenant, max_size=2, blob_threshold=BLOB_THRESHOLD, **extra
    )


def seed_pg(dsn: str, schema: str) -> None:
    for tenant, ring in (("a", A), ("b", B), ("c", None)):
        with pg_open(dsn, schema, tenant, ring) as store:
            fill(store)
            # An audit record of a redaction as well: erase deletes those with the runs.
            assert len(store.redact(Redaction(values=["the same question of r0"])).runs) == 1


# -- PostgreSQL ---------------------------------------------------------------------------


def test_erase_deletes_every_row_of_the_tenant_keys_first(postgres_dsn: str, pg_schema: str) -> None:
    seed_pg(postgres_dsn, pg_schema)
    before = {tenant: tenant_rows(postgres_dsn, pg_schema, tenant) for tenant in ("b", "c")}
    held = tenant_held(postgres_dsn, "a", schema=pg_schema)
    assert held.runs == 3
    assert held.data_keys == 1
    assert held.redactions == 1
    assert held.calls == 3

    steps: list[tuple[str, int]] = []
    report = erase_tenant(postgres_dsn, "a", schema=pg_schema, progress=lambda s, n: steps.append((s, n)))
    assert steps == [("data_keys", 1), ("runs", 3), ("blob_rows", 3), ("meta", 3)]  # the mark too
    assert (report.encrypted, report.runs, report.blob_rows) == (True, 3, 3)
    assert tenant_held(postgres_dsn, "a", schema=pg_schema) == Held()
    assert all(rows == [] for rows in tenant_rows(postgres_dsn, pg_schema, "a").values())
    assert {tenant: tenant_rows(postgres_dsn, pg_schema, tenant) for tenant in ("b", "c")} == before

    # Again: nothing found, nothing written.
    again = erase_tenant(postgres_dsn, "a", schema=pg_schema)
    assert not again.found
    assert all(rows == [] for rows in tenant_rows(postgres_dsn, pg_schema, "a").values())
    # The plain tenant erases the same way (no data keys to drop).
    plain = erase_tenant(postgres_dsn, "c", schema=pg_schema)
    assert (plain.encrypted, plain.data_keys, plain.runs) == (False, 0, 3)
    assert tenant_rows(postgres_dsn, pg_schema, "b") == before["b"]
    with pg_open(postgres_dsn, pg_schema, "b", B) as store:
        assert filled_right(store)
    # The name is free again: an open makes a new, empty tenant (under any keyring).
    with pg_open(postgres_dsn, pg_schema, "a", B) as store:
        assert list(store.runs()) == []


def test_a_tenant_being_erased_opens_for_no_one(postgres_dsn: str, pg_schema: str) -> None:
    """Stopped right after its first step, the tenant has no data keys and its runs are still
    there: no open succeeds (not even with its own keyring, which would make it a new data key
    and write beside what the erase deletes) until an erase finishes."""
    seed_pg(postgres_dsn, pg_schema)

    class Stop(Exception):
        pass

    def stop(step: str, count: int) -> None:
        raise Stop(step)

    with pytest.raises(Stop):
        erase_tenant(postgres_dsn, "a", schema=pg_schema, progress=stop)
    held = tenant_held(postgres_dsn, "a", schema=pg_schema)
    assert (held.data_keys, held.runs) == (0, 3)
    for ring in (A, None):
        with pytest.raises(StoreNotFound, match="being erased"):
            pg_open(postgres_dsn, pg_schema, "a", ring)
    assert erase_tenant(postgres_dsn, "a", schema=pg_schema).runs == 3
    assert tenant_held(postgres_dsn, "a", schema=pg_schema) == Held()


def test_erase_killed_at_each_step_then_rerun_by_the_cli_finishes(
    postgres_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    seed_pg(postgres_dsn, pg_schema)
    before_b = tenant_rows(postgres_dsn, pg_schema, "b")
    options = {"schema": pg_schema}
    # 1. Killed right after the data keys went: the runs are all there, no key opens them.
    assert killed_erase(postgres_dsn, "a", options, 1) == ["data_keys"]
    held = tenant_held(postgres_dsn, "a", schema=pg_schema)
    assert (held.data_keys, held.runs, held.blobs) == (0, 3, 3)
    with pytest.raises(StoreNotFound):
        pg_open(postgres_dsn, pg_schema, "a", A)
    # 2. The rerun killed after its page of runs; 3. the next after the blob rows.
    assert killed_erase(postgres_dsn, "a", options, 2) == ["data_keys", "runs"]
    held = tenant_held(postgres_dsn, "a", schema=pg_schema)
    assert (held.runs, held.checkpoints, held.calls, held.redactions, held.blobs) == (0, 0, 0, 0, 3)
    assert killed_erase(postgres_dsn, "a", options, 2) == ["data_keys", "blob_rows"]
    assert tenant_held(postgres_dsn, "a", schema=pg_schema) == Held(meta=3)  # store id, check, mark
    # 4. The real command finishes it.
    done = sp(
        tmp_path, "tenant", "erase", "a", "--yes", "--json", "--store", postgres_dsn, "--schema", pg_schema
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["meta"] == 3
    assert all(rows == [] for rows in tenant_rows(postgres_dsn, pg_schema, "a").values())
    assert tenant_rows(postgres_dsn, pg_schema, "b") == before_b
    with pg_open(postgres_dsn, pg_schema, "b", B) as store:
        assert filled_right(store)


def test_erase_deletes_the_tenants_namespace_in_a_shared_blob_store(
    postgres_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    """Blobs in a filesystem blob store shared by the tenants (``blobs=``): a named tenant's are
    under ``tenants/<tenant>/``, which erase deletes whole; the implicit tenant's are the root's
    own, which erase deletes one by one, leaving the named tenants' namespaces alone."""
    folder = tmp_path / "blobs"
    blobs = f"file://{folder}"
    for tenant, ring in (("default", None), ("a", A), ("b", B)):
        extra = {"encryption": ring} if ring else {}
        with safepoint.open_store(
            postgres_dsn, schema=pg_schema, tenant=tenant, blob_threshold=BLOB_THRESHOLD, blobs=blobs, **extra
        ) as store:
            fill(store)
    namespaces = {name.split("/")[1] for name in files_of(folder) if name.startswith("tenants/")}
    assert namespaces == {"a", "b"}
    rest = {name: digest for name, digest in files_of(folder).items() if not name.startswith("tenants/a/")}

    report = erase_tenant(postgres_dsn, "a", schema=pg_schema, blobs=blobs)
    assert (report.blob_objects, report.blob_rows, report.runs) == (3, 0, 3)
    assert not (folder / "tenants" / "a").exists()
    assert files_of(folder) == rest
    # The implicit tenant, through the command: the root's own objects, and nothing under tenants/.
    done = sp(
        tmp_path,
        "tenant",
        "erase",
        "default",
        "--yes",
        "--json",
        "--store",
        postgres_dsn,
        "--schema",
        pg_schema,
        "--blobs",
        blobs,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["blob_objects"] == 3
    assert files_of(folder) == {
        name: digest for name, digest in rest.items() if name.startswith("tenants/b/")
    }
    with safepoint.open_store(postgres_dsn, schema=pg_schema, tenant="b", encryption=B, blobs=blobs) as store:
        assert filled_right(store)


def test_the_application_role_erases_its_tenant_under_row_level_security(postgres_dsn: str) -> None:
    """As the documented application role (no superuser, no BYPASSRLS, owning nothing), erase
    deletes every row of its tenant and cannot touch another's: row-level security admits only
    the tenant the transaction names. The roles are unique and dropped at the end."""
    tag = uuid.uuid4().hex[:12]
    schema, owner, app = f"sp_test_{tag}", f"sp_{tag}_owner", f"sp_{tag}_app"

    def as_role(role: str) -> str:
        return re.sub(r"^postgresql://[^@/]*@", f"postgresql://{role}@", postgres_dsn)

    made: list[str] = []
    try:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            for role in (owner, app):
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER").format(sql.Identifier(role)))
                made.append(role)
            conn.execute(
                sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                    sql.Identifier(schema), sql.Identifier(owner)
                )
            )
        safepoint.open_store(as_role(owner), schema=schema, max_size=1).close()  # the owner's DDL
        with psycopg.connect(as_role(owner), autocommit=True) as conn:
            for grant in grant_statements(schema, app=app):
                conn.execute(grant)
        seed_pg(as_role(app), schema)
        before = {tenant: tenant_rows(postgres_dsn, schema, tenant) for tenant in ("b", "c")}
        report = erase_tenant(as_role(app), "a", schema=schema)
        assert (report.data_keys, report.runs, report.blob_rows, report.meta) == (1, 3, 3, 3)
        assert all(rows == [] for rows in tenant_rows(postgres_dsn, schema, "a").values())
        assert {tenant: tenant_rows(postgres_dsn, schema, tenant) for tenant in ("b", "c")} == before
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
            for role in made:
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


# -- SQLite -------------------------------------------------------------------------------


def files_of(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by its path, with the SHA-256 of its bytes."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def seed_sqlite(main: Path) -> None:
    safepoint.open_store(f"sqlite:///{main}").close()
    for tenant, ring in (("a", A), ("b", B), ("c", None)):
        extra = {"encryption": ring} if ring else {}
        with safepoint.open_store(
            f"sqlite:///{main}", tenant=tenant, blob_threshold=BLOB_THRESHOLD, **extra
        ) as store:
            fill(store)


def test_sqlite_erase_killed_then_rerun_removes_the_file_and_blobs_and_nothing_else(tmp_path: Path) -> None:
    main = tmp_path / "state.db"
    seed_sqlite(main)
    url = f"sqlite:///{main}"
    a = Path(tenant_path(str(main), "a"))
    others = {name: digest for name, digest in files_of(tmp_path).items() if "/a.db" not in name}
    assert any(name.startswith("state.db.tenants/b.db.blobs/") for name in others)

    with contextlib.closing(sqlite3.connect(a)) as conn:
        ((wrapped,),) = conn.execute("SELECT wrapped FROM safepoint_data_keys").fetchall()
    assert bytes(wrapped) in a.read_bytes()
    assert killed_erase(url, "a", {}, 1) == ["data_keys"]
    assert a.exists()
    # Gone from the file's pages and its WAL (secure_delete, the WAL truncated), not only unlinked.
    for leftover in (a, a.with_name(a.name + "-wal")):
        assert not leftover.exists() or bytes(wrapped) not in leftover.read_bytes()
    with pytest.raises(StoreNotFound):
        safepoint.open_store(url, tenant="a", encryption=A)
    assert tenant_held(url, "a").data_keys == 0
    assert killed_erase(url, "a", {}, 2) == ["data_keys", "blob_folder"]
    assert a.exists()
    assert not Path(str(a) + ".blobs").exists()
    done = sp(tmp_path, "tenant", "erase", "a", "--yes", "--json", "--store", url)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["files"] == [str(a)]
    assert not any(path.name.startswith("a.db") for path in a.parent.iterdir())
    assert files_of(tmp_path) == others  # b, c and the store's own file: byte for byte
    # A plain tenant too; then nothing found.
    assert erase_tenant(url, "c").runs == 3
    assert not erase_tenant(url, "c").found
    with safepoint.open_store(url, tenant="b", encryption=B) as store:
        assert filled_right(store)


def test_erase_refuses_what_it_should(tmp_path: Path) -> None:
    main = tmp_path / "state.db"
    seed_sqlite(main)
    url = f"sqlite:///{main}"
    with pytest.raises(InvalidArgument, match="implicit tenant"):
        erase_tenant(url, "default")
    with pytest.raises(InvalidArgument):
        erase_tenant(url, "../b")
    with pytest.raises(StoreNotFound):
        erase_tenant(f"sqlite:///{tmp_path / 'none.db'}", "a")
    assert not (tmp_path / "none.db").exists()
    with pytest.raises(InvalidArgument):
        erase_tenant("memory://", "a")
    # The keyless open of a still encrypted tenant is refused as before.
    with pytest.raises(EncryptedStore):
        safepoint.open_store(url, tenant="a")
    assert isinstance(erase_tenant(url, "never"), Erasure)
    assert not erase_tenant(url, "never").found


def test_the_cli_asks_names_and_exits_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    main = tmp_path / "state.db"
    seed_sqlite(main)
    url = f"sqlite:///{main}"
    cases = [
        (["tenant", "erase", "a", "--store", url], 2, "pass --yes"),  # stdin is no terminal: no erase
        (["tenant", "erase", "default", "--yes", "--json", "--store", url], 2, '"InvalidArgument"'),
        (["tenant", "erase", "Bad/Name", "--yes", "--store", url], 2, "lowercase"),
        (
            ["tenant", "erase", "a", "--yes", "--store", f"sqlite:///{tmp_path / 'none.db'}"],
            3,
            "no safepoint",
        ),
    ]
    # --tenant (or SAFEPOINT_TENANT) naming another tenant than NAME: a slip, refused.
    cases.append(
        (["tenant", "erase", "a", "--yes", "--tenant", "b", "--store", url], 2, "names another tenant")
    )
    for args, code, said in cases:
        done = sp(tmp_path, *args)
        assert done.returncode == code, (args, done.stderr)
        assert said in done.stderr, (args, done.stderr)
    assert Path(tenant_path(str(main), "a")).exists()
    monkeypatch.setenv("SAFEPOINT_TENANT", "a")  # a shell set up for the same tenant: fine
    done = sp(tmp_path, "tenant", "erase", "a", "--yes", "--store", url)
    assert done.returncode == 0, done.stderr
    assert "erased tenant a: 1 data keys" in done.stdout
    monkeypatch.delenv("SAFEPOINT_TENANT")
    again = sp(tmp_path, "tenant", "erase", "a", "--yes", "--store", url)
    assert again.returncode == 0
    assert "holds nothing" in again.stdout
    assert os.path.exists(tenant_path(str(main), "b"))


def test_a_sqlite_store_used_only_through_named_tenants_erases_them(tmp_path: Path) -> None:
    """A store whose own file was never made (every handle named a tenant) still erases one of
    its tenants; a folder with neither the file nor the tenants' folder is StoreNotFound."""
    url = f"sqlite:///{tmp_path / 'only-named.db'}"
    for tenant in ("a", "b"):
        with safepoint.open_store(url, tenant=tenant) as store:
            store.save(safepoint.Checkpoint(run_id="r", messages=[{"role": "user", "content": tenant}]))
    assert not (tmp_path / "only-named.db").exists()
    assert erase_tenant(url, "a").runs == 1
    with safepoint.open_store(url, tenant="b", read_only=True) as b:
        assert b.load("r").messages == [{"role": "user", "content": "b"}]
    with pytest.raises(StoreNotFound):
        erase_tenant(f"sqlite:///{tmp_path / 'nothing.db'}", "a")
