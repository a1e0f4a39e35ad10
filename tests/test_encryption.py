"""Encryption at rest, as a user meets it: the whole conformance suite on encrypted stores, rows and
blobs swapped or copied, plaintext refused, keys missing, rotated and read back from a fresh process."""

from __future__ import annotations

import asyncio
import base64
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import safepoint
from conftest_postgres import raw
from safepoint import Checkpoint, Keyring, Store
from safepoint.testing.conformance import StoreConformance, Tamper

INDEX = base64.b64encode(bytes(range(32))).decode()
K1 = base64.b64encode(b"\x11" * 32).decode()
K2 = base64.b64encode(b"\x22" * 32).decode()


def keyring(*ids: str) -> Keyring:
    keys = {"k1": K1, "k2": K2}
    return Keyring.from_text(" ".join([f"index:{INDEX}", *(f"{i}:{keys[i]}" for i in ids or ("k1",))]))


def flipped(sealed: bytes) -> bytes:
    """``sealed`` with one ciphertext byte changed, as a bad disk or a hand edit would."""
    data = bytearray(sealed)
    data[-20] ^= 0x01
    return bytes(data)


def sqlite_rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(sql, params).fetchall()
    conn.close()
    return rows


def sqlite_key(path: Path, run_id: str, step: int) -> int:
    ((run_ref,),) = sqlite_rows(path, "SELECT id FROM safepoint_runs WHERE run_id = ?", (run_id,))
    return int(run_ref) * 2**32 + step


def sqlite_encrypted_tamper(path: Path) -> Tamper:
    def tamper(store: Store, run_id: str, step: int, what: str) -> None:
        del store
        key = sqlite_key(path, run_id, step)
        column = "header" if what == "header" else "messages"
        ((value,),) = sqlite_rows(path, f"SELECT {column} FROM safepoint_checkpoints WHERE id = ?", (key,))
        changed = flipped(value) if what != "drop_message" else bytes(value)[:-1]
        sqlite_rows(path, f"UPDATE safepoint_checkpoints SET {column} = ? WHERE id = ?", (changed, key))

    return tamper


class TestEncryptedSQLiteStore(StoreConformance):
    """Every promise of the store, unchanged on an encrypted SQLite file."""

    @pytest.fixture
    def db_path(self, tmp_path: Path) -> Path:
        # Not "path": the conformance suite parametrizes a test by "path".
        return tmp_path / "encrypted.db"

    @pytest.fixture
    def opener(self, db_path: Path) -> Iterator[Callable[[], Store]]:
        opened: list[Store] = []

        def factory() -> Store:
            opened.append(safepoint.open_store(f"sqlite:///{db_path}", encryption=keyring()))
            return opened[-1]

        yield factory
        for store in opened:
            store.close()

    @pytest.fixture
    def store(self, opener: Callable[[], Store]) -> Store:
        return opener()

    @pytest.fixture
    def reopen(self, opener: Callable[[], Store]) -> Callable[[], Store]:
        return opener

    @pytest.fixture
    def tamper(self, db_path: Path) -> Tamper:
        return sqlite_encrypted_tamper(db_path)


class TestEncryptedPostgresStore(StoreConformance):
    """Every promise of the store, unchanged on an encrypted PostgreSQL schema."""

    @pytest.fixture
    def opener(self, postgres_dsn: str, pg_schema: str) -> Iterator[Callable[[], Store]]:
        opened: list[Store] = []

        def factory() -> Store:
            store = safepoint.open_store(postgres_dsn, schema=pg_schema, max_size=2, encryption=keyring())
            opened.append(store)
            return store

        yield factory
        for store in opened:
            store.close()

    @pytest.fixture
    def store(self, opener: Callable[[], Store]) -> Store:
        return opener()

    @pytest.fixture
    def reopen(self, opener: Callable[[], Store]) -> Callable[[], Store]:
        return opener

    @pytest.fixture
    def tamper(self, postgres_dsn: str, pg_schema: str) -> Tamper:
        def tamper(store: Store, run_id: str, step: int, what: str) -> None:
            del store
            column = "header" if what == "header" else "messages"
            where = " FROM safepoint_checkpoints c JOIN safepoint_runs r ON r.id = c.run_ref"
            where += " WHERE r.run_id = %(run_id)s AND c.step = %(step)s"
            key = {"run_id": run_id, "step": step}
            ((value,),) = raw(postgres_dsn, pg_schema, f"SELECT c.{column}" + where, key)
            changed = flipped(bytes(value)) if what != "drop_message" else bytes(value)[:-1]
            raw(
                postgres_dsn,
                pg_schema,
                f"UPDATE safepoint_checkpoints SET {column} = %(value)s WHERE (run_ref, step) ="
                " (SELECT c.run_ref, c.step" + where + ") RETURNING 1",
                {**key, "value": changed},
            )

        return tamper


# -- bound to its place --------------------------------------------------------


def conversation(store: Store, run_id: str, steps: int, **fields: Any) -> Checkpoint:
    """A run of ``steps`` checkpoints, each built fresh as the seed's harness does."""
    messages: list[dict[str, str]] = []
    for step in range(steps):
        messages.append({"role": "user", "content": f"{run_id} question {step}"})
        cp = Checkpoint(run_id=run_id, step=step, messages=list(messages), **fields)
        store.save(cp)
    return store.load(run_id)


@pytest.fixture
def encrypted(tmp_path: Path) -> Iterator[tuple[Store, Path]]:
    path = tmp_path / "state.db"
    store = safepoint.open_store(f"sqlite:///{path}", encryption=keyring())
    yield store, path
    store.close()


@pytest.mark.parametrize("column", ["header", "messages"])
def test_a_row_swapped_with_another_steps_fails_naming_run_and_step(
    encrypted: tuple[Store, Path], column: str
) -> None:
    store, path = encrypted
    conversation(store, "a", 3)
    one, two = sqlite_key(path, "a", 1), sqlite_key(path, "a", 2)
    ((first,),) = sqlite_rows(path, f"SELECT {column} FROM safepoint_checkpoints WHERE id = ?", (one,))
    ((second,),) = sqlite_rows(path, f"SELECT {column} FROM safepoint_checkpoints WHERE id = ?", (two,))
    sqlite_rows(path, f"UPDATE safepoint_checkpoints SET {column} = ? WHERE id = ?", (second, one))
    sqlite_rows(path, f"UPDATE safepoint_checkpoints SET {column} = ? WHERE id = ?", (first, two))
    with pytest.raises(safepoint.CorruptCheckpoint) as caught:
        store.load("a", step=1)
    assert (caught.value.run_id, caught.value.step) == ("a", 1)
    assert column in caught.value.detail
    with pytest.raises(safepoint.CorruptCheckpoint) as caught:
        store.load("a")
    # Step 2 sees the messages rows 1 and 2 carry: the error names the first bad row's step.
    assert caught.value.run_id == "a"
    assert caught.value.step in (1, 2)
    assert store.load("a", step=0).step == 0  # the rows left alone still load


@pytest.mark.parametrize("column", ["header", "messages"])
def test_cut_sealed_values_of_every_length_fail_typed(encrypted: tuple[Store, Path], column: str) -> None:
    """A sealed value cut at every length (the magic alone, half a key id, no tag): CorruptCheckpoint."""
    store, path = encrypted
    conversation(store, "a", 2)
    key = sqlite_key(path, "a", 1)
    ((whole,),) = sqlite_rows(path, f"SELECT {column} FROM safepoint_checkpoints WHERE id = ?", (key,))
    for length in range(1, len(whole)):
        sqlite_rows(
            path, f"UPDATE safepoint_checkpoints SET {column} = ? WHERE id = ?", (whole[:length], key)
        )
        with pytest.raises(safepoint.CorruptCheckpoint) as caught:
            store.load("a")
        assert caught.value.run_id == "a", length
    sqlite_rows(path, f"UPDATE safepoint_checkpoints SET {column} = ? WHERE id = ?", (whole, key))
    assert store.load("a").step == 1


def test_a_damaged_chain_value_only_costs_the_shortcut(encrypted: tuple[Store, Path]) -> None:
    """Chain values speed up a fresh checkpoint's save; cut or altered, the save reads the bodies."""
    store, path = encrypted
    conversation(store, "a", 3)
    key = sqlite_key(path, "a", 2)
    ((whole,),) = sqlite_rows(path, "SELECT chains FROM safepoint_checkpoints WHERE id = ?", (key,))
    for damaged in (whole[:4], whole[:9], whole[:-1], flipped(whole)):
        sqlite_rows(path, "UPDATE safepoint_checkpoints SET chains = ? WHERE id = ?", (damaged, key))
        fresh = safepoint.open_store(f"sqlite:///{path}", encryption=keyring())  # nothing remembered
        latest = fresh.load("a")
        messages = [*latest.messages, {"role": "user", "content": "next"}]
        fresh.save(Checkpoint(run_id="a", step=latest.step + 1, messages=messages))
        assert fresh.load("a").messages == messages
        fresh.close()


@pytest.mark.parametrize("loaded_before", [False, True])
def test_a_row_copied_onto_another_run_fails(encrypted: tuple[Store, Path], loaded_before: bool) -> None:
    store, path = encrypted
    conversation(store, "a", 2)
    conversation(store, "b", 2)
    if loaded_before:  # the sealer has made both runs' associated data (it keeps them by run and column)
        store.load("a")
        store.load("b")
    ((header,),) = sqlite_rows(
        path, "SELECT header FROM safepoint_checkpoints WHERE id = ?", (sqlite_key(path, "a", 1),)
    )
    sqlite_rows(
        path, "UPDATE safepoint_checkpoints SET header = ? WHERE id = ?", (header, sqlite_key(path, "b", 1))
    )
    with pytest.raises(safepoint.CorruptCheckpoint) as caught:
        store.load("b")
    assert (caught.value.run_id, caught.value.step) == ("b", 1)


def test_a_store_copied_into_another_store_does_not_open(tmp_path: Path) -> None:
    """The same keyring on two stores: each has its own id, so rows of one do not open in the other."""
    first = safepoint.open_store(f"sqlite:///{tmp_path}/one.db", encryption=keyring())
    second = safepoint.open_store(f"sqlite:///{tmp_path}/two.db", encryption=keyring())
    conversation(first, "a", 2)
    conversation(second, "a", 2)
    first.close(), second.close()
    (header,) = sqlite_rows(tmp_path / "one.db", "SELECT header FROM safepoint_checkpoints")[-1]
    sqlite_rows(
        tmp_path / "two.db",
        "UPDATE safepoint_checkpoints SET header = ? WHERE id = ?",
        (header, sqlite_key(tmp_path / "two.db", "a", 1)),
    )
    # The data key rows copied too, so the key is there: only the store id tells them apart.
    for row in sqlite_rows(
        tmp_path / "one.db", "SELECT key_id, kek_id, wrapped, created_at FROM safepoint_data_keys"
    ):
        sqlite_rows(tmp_path / "two.db", "INSERT OR IGNORE INTO safepoint_data_keys VALUES (?, ?, ?, ?)", row)
    # The copied data key row is another store's: its key does not unwrap here, and InvalidKey names it.
    ((foreign,),) = sqlite_rows(tmp_path / "one.db", "SELECT key_id FROM safepoint_data_keys")
    with pytest.raises(safepoint.InvalidKey, match=foreign):  # found at open, before anything is written
        safepoint.open_store(f"sqlite:///{tmp_path}/two.db", encryption=keyring())


def test_two_blobs_swapped_fail_with_blob_corrupt(tmp_path: Path) -> None:
    store = safepoint.open_store(f"sqlite:///{tmp_path}/state.db", encryption=keyring())
    one, two = "first tool output " * 20_000, "second tool output " * 20_000
    store.save(Checkpoint(run_id="a", messages=[{"role": "tool", "content": one}]))
    store.save(Checkpoint(run_id="b", messages=[{"role": "tool", "content": two}]))
    files = sorted(p for p in (tmp_path / "state.db.blobs").rglob("*") if p.is_file())
    assert len(files) == 2
    swap = files[0].with_suffix(".swap")
    shutil.move(files[0], swap), shutil.move(files[1], files[0]), shutil.move(swap, files[1])
    for run_id in ("a", "b"):
        with pytest.raises(safepoint.BlobCorrupt) as caught:
            store.load(run_id)
        assert (caught.value.run_id, caught.value.step) == (run_id, 0)
    store.close()


def test_blobs_in_the_database_table_are_sealed_and_deduplicated(tmp_path: Path) -> None:
    store = safepoint.open_store(f"sqlite:///{tmp_path}/state.db", blobs="database", encryption=keyring())
    output = "the same tool output " * 10_000
    store.save(Checkpoint(run_id="a", messages=[{"role": "tool", "content": output}]))
    store.save(Checkpoint(run_id="b", messages=[{"role": "tool", "content": output}]))
    assert store.load("b").messages[0]["content"] == output
    ((count, data),) = sqlite_rows(tmp_path / "state.db", "SELECT count(*), max(data) FROM safepoint_blobs")
    assert count == 1
    assert b"tool output" not in bytes(data)
    store.close()


# -- fail-closed ---------------------------------------------------------------


def test_an_encrypted_store_opened_without_its_keyring_reads_nothing(encrypted: tuple[Store, Path]) -> None:
    store, path = encrypted
    conversation(store, "a", 2, labels={"team": "x"})
    for read_only in (False, True):
        with pytest.raises(safepoint.EncryptedStore):
            safepoint.open_store(f"sqlite:///{path}", read_only=read_only)


def test_a_plaintext_row_on_an_encrypted_store_is_refused(
    encrypted: tuple[Store, Path], tmp_path: Path
) -> None:
    store, path = encrypted
    conversation(store, "a", 2)
    other = safepoint.open_store(f"sqlite:///{tmp_path}/plain.db")
    conversation(other, "a", 2)
    other.close()
    ((header, digest),) = sqlite_rows(
        tmp_path / "plain.db",
        "SELECT header, digest FROM safepoint_checkpoints WHERE id = ?",
        (sqlite_key(tmp_path / "plain.db", "a", 1),),
    )
    sqlite_rows(
        path,
        "UPDATE safepoint_checkpoints SET header = ?, digest = ? WHERE id = ?",
        (header, digest, sqlite_key(path, "a", 1)),
    )
    with pytest.raises(safepoint.CorruptCheckpoint, match="plain text"):
        store.load("a")


def test_a_keyring_never_turns_a_plaintext_store_encrypted_by_accident(tmp_path: Path) -> None:
    plain = safepoint.open_store(f"sqlite:///{tmp_path}/state.db")
    conversation(plain, "a", 1)
    plain.close()
    with pytest.raises(safepoint.NotEncrypted, match="safepoint encrypt"):
        safepoint.open_store(f"sqlite:///{tmp_path}/state.db", encryption=keyring())
    with pytest.raises(safepoint.NotEncrypted):
        safepoint.open_store(f"sqlite:///{tmp_path}/state.db", encryption=keyring(), read_only=True)
    reopened = safepoint.open_store(f"sqlite:///{tmp_path}/state.db")
    assert reopened.load("a").step == 0  # nothing was changed
    reopened.close()


# -- keys ----------------------------------------------------------------------


def test_a_missing_key_names_the_key_id_needed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    store = safepoint.open_store(url, encryption=keyring("k1"))
    conversation(store, "a", 2)
    store.close()
    only_k2 = safepoint.open_store(url, encryption=keyring("k2"))
    with pytest.raises(safepoint.MissingKey) as caught:
        only_k2.load("a")
    assert caught.value.key_id == "k1"
    assert "'k1'" in str(caught.value)
    only_k2.close()


def test_a_new_key_writes_and_the_old_one_still_reads(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    store = safepoint.open_store(url, encryption=keyring("k1"))
    old = conversation(store, "a", 3, labels={"team": "blue"})
    store.close()
    rotated = safepoint.open_store(url, encryption=keyring("k1", "k2"))
    assert rotated.load("a").messages == old.messages
    rotated.save(rotated.load("a").next())  # sealed under a new data key, wrapped by k2
    keks = sorted(k for (k,) in sqlite_rows(tmp_path / "state.db", "SELECT kek_id FROM safepoint_data_keys"))
    assert keks == ["k1", "k2"]
    assert [r.run_id for r in rotated.runs(labels={"team": "blue"}).items] == ["a"]
    rotated.close()
    with pytest.raises(safepoint.MissingKey, match="'k2'"):
        safepoint.open_store(url, encryption=keyring("k1"), read_only=True).load("a")


def test_label_filters_work_through_the_blind_index(encrypted: tuple[Store, Path]) -> None:
    store, path = encrypted
    for run_id, team in (("a", "blue"), ("b", "red"), ("c", "blue")):
        conversation(store, run_id, 1, labels={"team": team, "tenant": "t1"})
    found = store.runs(labels={"team": "blue"}).items
    assert sorted(r.run_id for r in found) == ["a", "c"]
    assert all(r.labels == {"team": "blue", "tenant": "t1"} for r in found)
    assert [r.run_id for r in store.runs(labels={"team": "green"}).items] == []
    stored = " ".join(str(v) for (v,) in sqlite_rows(path, "SELECT labels FROM safepoint_runs"))
    assert "blue" not in stored
    assert "team" not in stored


def test_the_async_store_reads_what_the_sync_store_sealed(encrypted: tuple[Store, Path]) -> None:
    store, path = encrypted
    saved = conversation(store, "a", 3, state={"k": "v"})

    async def scenario() -> None:
        async_store = await safepoint.open_async_store(f"sqlite:///{path}", encryption=keyring())
        loaded = await async_store.load("a")
        assert loaded.messages == saved.messages
        assert loaded.state == {"k": "v"}
        await async_store.save(loaded.next())
        await async_store.close()

    asyncio.run(scenario())
    assert store.load("a").step == 3


def test_async_postgres_store_round_trips(postgres_dsn: str, pg_schema: str) -> None:
    async def scenario() -> None:
        store = await safepoint.open_async_store(postgres_dsn, schema=pg_schema, encryption=keyring())
        cp = Checkpoint(run_id="a", messages=[{"role": "user", "content": "hello"}], labels={"x": "y"})
        await store.save(cp)
        loaded = await store.load("a")
        assert loaded.messages[0]["content"] == "hello"
        page = await store.runs(labels={"x": "y"})
        assert [r.run_id for r in page.items] == ["a"]
        await store.close()

    asyncio.run(scenario())
    ((labels,),) = raw(postgres_dsn, pg_schema, "SELECT labels::text FROM safepoint_runs")
    assert '"x"' not in labels
    assert '"y"' not in labels


# -- upkeep, unchanged ---------------------------------------------------------


@pytest.mark.parametrize("blobs", ["files", "database"])
def test_retention_and_garbage_collection_work_on_an_encrypted_store(tmp_path: Path, blobs: str) -> None:
    options: dict[str, Any] = {"encryption": keyring(), "blob_threshold": 1024}
    if blobs == "database":
        options["blobs"] = "database"
    store = safepoint.open_store(f"sqlite:///{tmp_path}/state.db", **options)
    kept = conversation(store, "kept", 6)
    doomed = Checkpoint(run_id="doomed", messages=[{"role": "tool", "content": "doomed output " * 500}])
    store.save(doomed)
    cp = store.load("kept").next()
    cp.messages.append({"role": "tool", "content": "kept output " * 500})
    store.save(cp)
    pruned = store.prune_run("kept", safepoint.Retention(keep_last=2))
    assert pruned.pruned_steps == [0, 1, 2, 3, 4]
    store.delete_run("doomed")
    result = store.collect_garbage()
    assert result.blobs_deleted == 1
    assert result.blobs_kept == 1
    latest = store.load("kept")
    assert latest.messages[: len(kept.messages)] == kept.messages
    assert latest.messages[-1]["content"] == "kept output " * 500
    assert [c.step for c in store.history("kept")] == [5, 6]
    store.close()


def test_concurrent_saves_of_many_runs_share_commits_on_an_encrypted_store(tmp_path: Path) -> None:
    """Group commit (threads sharing one Store) seals each run's save for its own place."""
    store = safepoint.open_store(f"sqlite:///{tmp_path}/state.db", encryption=keyring())
    errors: list[BaseException] = []

    def agent(run_id: str) -> None:
        try:
            conversation(store, run_id, 15)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=agent, args=(f"t{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for i in range(8):
        loaded = store.load(f"t{i}")
        assert loaded.step == 14
        assert loaded.messages[-1]["content"] == f"t{i} question 14"
    store.close()
