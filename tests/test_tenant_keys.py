"""Keys per tenant, and erasure by key across backups.

On PostgreSQL the tenants of one schema each keep their own encryption facts
(``safepoint_meta`` per tenant: store id, index key check value), so each is opened
with a keyring of its own: equal content in two tenants is stored twice, under
different data keys, keyed digests and blob names; one tenant's keyring opens nothing
of another's; a keyless open of an encrypted tenant is refused while a plain tenant
of the same schema opens. On SQLite each tenant is a file, keyed the same way.

Erasure by key: a backup (``pg_dump`` restored into another database; SQLite's
``backup_store`` of each tenant's file) holds the tenants' data keys wrapped under
their KEKs, never a KEK. Once tenant A's keyring is discarded, none of A's values
opens — from the live store or the backup — with any key the test still holds (B's
keyring, a fresh one: every data key they unwrap, tried on every sealed value of A),
while every value of B opens from both.
"""

from __future__ import annotations

import base64
import contextlib
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

import safepoint
from safepoint import Keyring
from safepoint.blobs.base import blob_digest
from safepoint.crypto.sealing import SealBroken
from safepoint.crypto.wrapping import unwrap_for_store
from safepoint.errors import EncryptedStore, InvalidKey, MissingKey
from safepoint.store.admin import ToEncrypt, backup_store, encrypt_store, key_status, rekey_store
from safepoint.store.tenants import tenant_path
from tenant_seed import (
    BLOB_THRESHOLD,
    RUN_IDS,
    big,
    data_keys_of,
    dump_schema,
    fill,
    filled_right,
    keyring,
    opened,
    sealed_values,
    tenant_rows,
)

A, B = keyring(1), keyring(2)
KEK_A = base64.b64encode(bytes([101]) * 32).decode()  # A's KEK (tenant_seed.keyring: seed + 100)
FRESH = keyring(3)
A_ID_WRONG_BYTES = keyring(4, kek_id="kek1")  # A's KEK id, other bytes; its own index key
B_WITH_A_ID = keyring(2, kek_id="kek1")  # B's keys, with the id A's rows name


def pg_open(
    dsn: str, schema: str, tenant: str, ring: Keyring | None = None, **options: object
) -> safepoint.Store:
    extra = {} if ring is None else {"encryption": ring}
    return safepoint.open_store(
        dsn, schema=schema, tenant=tenant, max_size=2, blob_threshold=BLOB_THRESHOLD, **extra, **options
    )


@pytest.fixture
def restored_db(postgres_dsn: str) -> Iterator[str]:
    """A fresh database for a restored dump, dropped at the end even on failure."""
    name = f"sp_tenant_keys_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(urlsplit(postgres_dsn)._replace(path=f"/{name}", query=""))
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def three_tenants(postgres_dsn: str, pg_schema: str) -> tuple[str, str]:
    """Tenants a (keyring A), b (keyring B) and c (plain) of one schema, each holding ``fill``."""
    for tenant, ring in (("a", A), ("b", B), ("c", None)):
        with pg_open(postgres_dsn, pg_schema, tenant, ring) as store:
            fill(store)
    return postgres_dsn, pg_schema


def test_equal_content_in_two_tenants_shares_nothing_keyed(three_tenants: tuple[str, str]) -> None:
    dsn, schema = three_tenants
    a, b, c = (tenant_rows(dsn, schema, tenant) for tenant in ("a", "b", "c"))
    # Every tenant stored it: three runs of two steps, a journal entry each, their blobs.
    for rows in (a, b, c):
        assert len(rows["safepoint_runs"]) == 3
        assert len(rows["safepoint_checkpoints"]) == 6
        assert len(rows["safepoint_calls"]) == 3
        assert len(rows["safepoint_blobs"]) == 3  # the journal's page and the tool message are equal text

    # Nothing keyed is shared between a and b: store ids, index check values, data keys (ids and
    # wrapped bytes), checkpoint and head digests, blob names and bytes, sealed values, label tokens.
    def values(tenant: str, query: str) -> set[object]:
        with psycopg.connect(dsn) as conn:
            conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
            return {
                bytes(value) if isinstance(value, memoryview) else value
                for (value,) in conn.execute(query, (tenant,)).fetchall()
            }

    queries = {
        "meta": "SELECT value FROM safepoint_meta WHERE tenant = %s",
        "data key ids": "SELECT key_id FROM safepoint_data_keys WHERE tenant = %s",
        "wrapped data keys": "SELECT wrapped FROM safepoint_data_keys WHERE tenant = %s",
        "checkpoint digests": "SELECT digest FROM safepoint_checkpoints WHERE tenant = %s",
        "head digests": "SELECT head_digest FROM safepoint_runs WHERE tenant = %s",
        "headers": "SELECT header FROM safepoint_checkpoints WHERE tenant = %s",
        "messages": "SELECT messages FROM safepoint_checkpoints WHERE tenant = %s",
        "labels": "SELECT labels::text FROM safepoint_runs WHERE tenant = %s",
        "blob names": "SELECT digest FROM safepoint_blobs WHERE tenant = %s",
        "blob bytes": "SELECT data FROM safepoint_blobs WHERE tenant = %s",
        "journal digests": "SELECT digest FROM safepoint_calls WHERE tenant = %s",
        "journal results": "SELECT result FROM safepoint_calls WHERE tenant = %s",
    }
    for what, query in queries.items():
        of_a, of_b = values("a", query) - {None}, values("b", query) - {None}
        assert of_a, what
        assert of_b, what
        assert not of_a & of_b, f"tenants a and b share {what}"
    # The plain tenant's blobs are named by their plain SHA-256; the encrypted ones' by keyed digests.
    plain_names = {blob_digest(big(run_id).encode()) for run_id in RUN_IDS}
    assert values("c", queries["blob names"]) == plain_names
    assert not plain_names & (values("a", queries["blob names"]) | values("b", queries["blob names"]))
    assert len(a["safepoint_meta"]) == len(b["safepoint_meta"]) == 2  # store id, index check
    assert c["safepoint_meta"] == []
    assert c["safepoint_data_keys"] == []


def test_each_tenant_opens_only_with_its_own_keyring(three_tenants: tuple[str, str]) -> None:
    dsn, schema = three_tenants
    for ring in (B, FRESH, A_ID_WRONG_BYTES, B_WITH_A_ID):
        with pytest.raises(InvalidKey):
            pg_open(dsn, schema, "a", ring)
    for read_only in (False, True):
        with pytest.raises(EncryptedStore):
            pg_open(dsn, schema, "a", read_only=read_only)
    with pytest.raises(EncryptedStore):
        pg_open(dsn, schema, "b")
    with pg_open(dsn, schema, "c") as plain:  # the plain tenant of the same schema opens without keys
        assert filled_right(plain)
    for tenant, ring in (("a", A), ("b", B)):
        with pg_open(dsn, schema, tenant, ring) as store:
            assert filled_right(store)
    # A refused open wrote nothing: a and b hold what they held.
    assert len(tenant_rows(dsn, schema, "a")["safepoint_data_keys"]) == 1


def test_rekeying_and_encrypting_one_tenant_leave_the_others_byte_for_byte(
    three_tenants: tuple[str, str],
) -> None:
    """keys.py works per tenant: rekey and encrypt read and write only the tenant's data keys,
    rows and blobs (equal content in a plain tenant has the same blob names as in another)."""
    dsn, schema = three_tenants
    with pg_open(dsn, schema, "d") as plain:  # a second plain tenant: c's blob names, equal content
        fill(plain)
    untouched = {tenant: tenant_rows(dsn, schema, tenant) for tenant in ("b", "d")}
    kek = "kek9:" + base64.b64encode(b"\x99" * 32).decode()
    a_rotated = Keyring.from_text(f"index:{base64.b64encode(bytes([1]) * 32).decode()} kek1:{KEK_A} {kek}")
    with pg_open(dsn, schema, "a", a_rotated) as store:
        done = rekey_store(store)
        assert done.ok
        assert done.rewrapped == 1
        assert key_status(store).by_keyring_key()["kek1"] == 0
    with pg_open(dsn, schema, "c", ToEncrypt(FRESH)) as store:
        assert encrypt_store(store, FRESH).ok
    assert {tenant: tenant_rows(dsn, schema, tenant) for tenant in ("b", "d")} == untouched
    for tenant, ring in (("a", a_rotated), ("c", FRESH), ("b", B), ("d", None)):
        with pg_open(dsn, schema, tenant, ring) as store:
            assert filled_right(store)


def test_sqlite_tenant_files_are_keyed_apart(tmp_path: Path) -> None:
    main = tmp_path / "state.db"
    url = f"sqlite:///{main}"
    for tenant, ring in (("a", A), ("b", B)):
        with safepoint.open_store(
            url, tenant=tenant, encryption=ring, blob_threshold=BLOB_THRESHOLD
        ) as store:
            fill(store)

    def blob_names(tenant: str) -> set[str]:
        folder = Path(tenant_path(str(main), tenant) + ".blobs")
        return {path.name for path in folder.rglob("*") if path.is_file()}

    assert len(blob_names("a")) == len(blob_names("b")) == 3
    assert not blob_names("a") & blob_names("b")
    with pytest.raises(InvalidKey):
        safepoint.open_store(url, tenant="a", encryption=B)
    with pytest.raises(EncryptedStore):
        safepoint.open_store(url, tenant="a")
    with safepoint.open_store(url, tenant="b", encryption=B) as store:
        assert filled_right(store)


# -- erasure by key, across backups --------------------------------------------------------


def test_discarding_a_tenants_keys_erases_it_from_the_live_store_and_a_pg_dump(
    three_tenants: tuple[str, str], restored_db: str, tmp_path: Path
) -> None:
    dsn, schema = three_tenants
    dump_schema(dsn, schema, restored_db, tmp_path / "store.dump")
    places = {"live": dsn, "restored": restored_db}
    # Before: the backup holds A's values, and A's keyring opens them there (so what follows
    # fails for want of keys, not for want of data).
    with pg_open(restored_db, schema, "a", A) as store:
        assert filled_right(store)
    for where in places.values():
        assert opened(sealed_values(where, schema, "a"), data_keys_of(where, schema, [A])) == 9

    # A's keyring is discarded: from here on the test holds B's keyring and fresh ones only.
    held = [B, FRESH, A_ID_WRONG_BYTES, B_WITH_A_ID]
    for name, where in places.items():
        values_a = sealed_values(where, schema, "a")
        keys = data_keys_of(where, schema, held)  # every data key any held KEK unwraps, any tenant's
        assert keys, name  # B's own
        assert opened(values_a, keys) == 0, name
        for ring in held:
            with pytest.raises(InvalidKey):
                pg_open(where, schema, "a", ring)
        with pytest.raises(EncryptedStore):
            pg_open(where, schema, "a")
        # Every value of B opens, from the live store and from the backup.
        assert opened(sealed_values(where, schema, "b"), data_keys_of(where, schema, [B])) == 9
        with pg_open(where, schema, "b", B) as store:
            assert filled_right(store)
        with pg_open(where, schema, "c") as store:
            assert filled_right(store)


def unwrapped(path: str, keyrings: list[Keyring]) -> int:
    """How many of the data keys in the SQLite file ``path`` one of ``keyrings``' KEKs unwraps,
    under any id the keyring holds. Without its data keys nothing sealed in the file opens."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        ((store_id,),) = conn.execute("SELECT value FROM safepoint_meta WHERE name = 'store_id'").fetchall()
        rows = conn.execute("SELECT key_id, wrapped FROM safepoint_data_keys").fetchall()
    count = 0
    pairs = [(ring, kek_id) for ring in keyrings for kek_id in ring.ids]
    for key_id, sealed in rows:
        for ring, kek_id in pairs:
            try:
                unwrap_for_store(ring, kek_id, bytes(sealed), store_id, key_id)
            except (InvalidKey, MissingKey, SealBroken):
                continue
            count += 1
            break
    return count


def test_discarding_a_tenants_keys_erases_it_from_a_sqlite_backup(tmp_path: Path) -> None:
    main = tmp_path / "live" / "state.db"
    url = f"sqlite:///{main}"
    backups = tmp_path / "backups"
    backups.mkdir()
    for tenant, ring in (("a", A), ("b", B)):
        with safepoint.open_store(
            url, tenant=tenant, encryption=ring, blob_threshold=BLOB_THRESHOLD
        ) as store:
            fill(store)
            backup_store(store, backups / f"{tenant}.db")  # the tenant's own file, and its blobs
    files_a = [tenant_path(str(main), "a"), str(backups / "a.db")]
    assert all(unwrapped(path, [A]) == 1 for path in files_a)  # the copies hold A's data key
    # A's keyring is discarded: the test holds B's keyring and fresh ones only.
    held = [B, FRESH, A_ID_WRONG_BYTES, B_WITH_A_ID]
    assert all(unwrapped(path, held) == 0 for path in files_a)  # no held KEK unwraps it
    for copy in (url, f"sqlite:///{backups / 'a.db'}"):
        tenant = "a" if copy == url else None
        for ring in held:
            with pytest.raises(InvalidKey):
                safepoint.open_store(copy, tenant=tenant, encryption=ring)
        with pytest.raises(EncryptedStore):
            safepoint.open_store(copy, tenant=tenant)
    for copy, tenant in ((url, "b"), (f"sqlite:///{backups / 'b.db'}", None)):
        with safepoint.open_store(copy, tenant=tenant, encryption=B) as store:
            assert filled_right(store)
