"""Tenants holding equal content under keyrings of their own, and how to look at their rows.

Used by test_tenant_keys.py and test_tenant_erase.py. ``fill`` writes the same runs into
any tenant (messages, state, labels, a blob, a journal entry whose result is a blob);
``tenant_rows`` reads every row a tenant holds in a PostgreSQL schema with raw SQL, as
the superuser the tests connect as (row-level security does not apply to it), so that
two snapshots compare byte for byte.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from safepoint import Checkpoint, Keyring, Store
from safepoint.crypto.sealing import DataKey, Place, SealBroken, is_sealed, parts
from safepoint.crypto.wrapping import unwrap_for_store
from safepoint.errors import InvalidKey, MissingKey
from safepoint.store.postgres.roles import TENANT_TABLES
from safepoint.store.sealer import RUN_WIDE

BLOB_THRESHOLD = 1_000  # the tests' stores offload values above this: every run holds blobs
RUN_IDS = ("r0", "r1", "r2")
TABLES = TENANT_TABLES  # every table that holds a tenant's rows (DDL revision 12)
PG_BIN_FALLBACK = Path("/usr/lib/postgresql")


def keyring(seed: int, kek_id: str | None = None) -> Keyring:
    """A keyring of its own: an index key and one KEK, both from ``seed``."""
    index = base64.b64encode(bytes([seed]) * 32).decode()
    kek = base64.b64encode(bytes([seed + 100]) * 32).decode()
    return Keyring.from_text(f"index:{index} {kek_id or f'kek{seed}'}:{kek}")


def big(run_id: str) -> str:
    return f"the same long tool output of {run_id}. " * 60  # above BLOB_THRESHOLD: a blob


def fill(store: Store) -> None:
    """The same runs in any tenant: equal content, so that only keys can make it differ."""
    for run_id in RUN_IDS:
        cp = Checkpoint(
            run_id=run_id,
            messages=[{"role": "user", "content": f"the same question of {run_id}"}],
            state={"note": f"the same state of {run_id}"},
            labels={"customer": "same", "run": run_id},
        )
        store.save(cp)
        store.record_call(run_id, "fetch-1", {"page": big(run_id)})
        cp = cp.next()
        cp.messages.append({"role": "tool", "content": big(run_id)})
        store.save(cp)


def filled_right(store: Store) -> bool:
    """Every value ``fill`` wrote loads back as written (blobs and the journal included)."""
    for run_id in RUN_IDS:
        head = store.load(run_id)
        first = store.load(run_id, 0)
        if head.messages[-1]["content"] != big(run_id) or first.state != {
            "note": f"the same state of {run_id}"
        }:
            return False
        if head.labels != {"customer": "same", "run": run_id}:
            return False
        if [entry.result for entry in store.recorded_calls(run_id)] != [{"page": big(run_id)}]:
            return False
    return True


def tenant_rows(dsn: str, schema: str, tenant: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row ``tenant`` holds, per table, as stored (bytea as bytes), in a fixed order."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        for table in TABLES:
            query = sql.SQL("SELECT * FROM {} WHERE tenant = %s ORDER BY 1, 2").format(sql.Identifier(table))
            rows = conn.execute(query, (tenant,)).fetchall()
            out[table] = [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in rows]
    return out


def held_rows(dsn: str, schema: str, tenant: str) -> int:
    """How many rows ``tenant`` holds in all the tenant tables."""
    return sum(len(rows) for rows in tenant_rows(dsn, schema, tenant).values())


def sealed_values(dsn: str, schema: str, tenant: str) -> list[tuple[bytes, str, Place]]:
    """Each sealed header and database blob of ``tenant`` with the place it was sealed for
    (its store id from the tenant's meta) — what an attacker holding the rows would try to open."""
    found: list[tuple[bytes, str, Place]] = []
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        ((store_id,),) = conn.execute(
            "SELECT value FROM safepoint_meta WHERE tenant = %s AND name = 'store_id'", (tenant,)
        ).fetchall()
        headers = conn.execute(
            "SELECT r.run_id, c.step, c.header FROM safepoint_checkpoints c"
            " JOIN safepoint_runs r ON r.id = c.run_ref WHERE c.tenant = %s",
            (tenant,),
        ).fetchall()
        blobs = conn.execute(
            "SELECT digest, data FROM safepoint_blobs WHERE tenant = %s", (tenant,)
        ).fetchall()
    for run_id, step, header in headers:
        found.append((bytes(header), store_id, Place(store_id, run_id, step, "header")))
    for digest, data in blobs:
        found.append((bytes(data), store_id, Place(store_id, "", RUN_WIDE, "blob " + digest)))
    assert found
    assert all(is_sealed(value) for value, _, _ in found)
    return found


def data_keys_of(dsn: str, schema: str, keyrings: list[Keyring]) -> list[DataKey]:
    """Every data key in the schema, of any tenant, that one of ``keyrings``' KEKs unwraps — under
    the KEK id it was wrapped with or any other id the keyring holds (a relabelled row)."""
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        wrapped = conn.execute("SELECT tenant, key_id, wrapped FROM safepoint_data_keys").fetchall()
        ids = dict(
            conn.execute("SELECT tenant, value FROM safepoint_meta WHERE name = 'store_id'").fetchall()
        )
    keys = []
    for tenant, key_id, sealed in wrapped:
        for ring in keyrings:
            for kek_id in ring.ids:
                try:
                    keys.append(unwrap_for_store(ring, kek_id, bytes(sealed), ids[tenant], key_id))
                except (InvalidKey, MissingKey, SealBroken):
                    continue
    return keys


def opened(values: list[tuple[bytes, str, Place]], keys: list[DataKey]) -> int:
    """How many of ``values`` one of ``keys`` opens (every key tried on every value)."""
    count = 0
    for value, _, place in values:
        _, nonce, body = parts(value)
        for key in keys:
            try:
                key.open_parts(nonce, body, place)
            except SealBroken:
                continue
            count += 1
            break
    return count


def pg_tool(name: str) -> str:
    """A PostgreSQL client program: on PATH, else under /usr/lib/postgresql/N/bin."""
    found = shutil.which(name)
    if found:
        return found
    for folder in sorted(PG_BIN_FALLBACK.glob("*/bin"), key=lambda path: int(path.parent.name), reverse=True):
        if (folder / name).is_file():
            return str(folder / name)
    pytest.fail(f"{name} not found on PATH or under {PG_BIN_FALLBACK}", pytrace=False)


def dump_schema(dsn: str, schema: str, target_url: str, dump: Path) -> None:
    """``pg_dump`` of ``schema`` (custom format) restored with ``pg_restore`` into ``target_url``."""
    subprocess.run(
        [pg_tool("pg_dump"), "--format=custom", f"--schema={schema}", f"--file={dump}", f"--dbname={dsn}"],
        check=True,
        timeout=120,
    )
    restore = [pg_tool("pg_restore"), "--exit-on-error", "--no-owner", f"--dbname={target_url}", str(dump)]
    subprocess.run(restore, check=True, timeout=120)
