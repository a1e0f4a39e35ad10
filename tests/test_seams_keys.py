"""The keys seam fails closed (issue 30): a process without the keyring, with a wrong key-encryption
key or with a wrong index key is refused at open with a typed error, on SQLite and PostgreSQL, sync
and async, in code and from the CLI — and writes nothing, so the keyed listing stays whole. rekey and
encrypt finish every run but a damaged one, which they list; a store made before the index key's
check value gets it only once its index key verified a head; a nonce batch is redrawn in a child
forked by libc; a key file open to other users is refused."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import safepoint
from conftest_postgres import raw
from safepoint import Checkpoint, Keyring
from safepoint.store.admin import ToEncrypt
from safepoint.store.encryption import INDEX_CHECK_NAME, STATE, STORE_ID, index_check
from safepoint_exe import sp
from test_encryption import INDEX, K1, K2, flipped, sqlite_key, sqlite_rows
from test_encryption_cli import key_file

WRONG = base64.b64encode(b"\x99" * 32).decode()
RIGHT = f"index:{INDEX} k1:{K1}"
CASES = {
    "keyless": None,
    "wrong-kek": f"index:{INDEX} k1:{WRONG}",  # the right id, other bytes
    "wrong-index": f"index:{WRONG} k1:{K1}",
    "wrong-old-kek": f"index:{INDEX} k1:{WRONG} k2:{K2}",  # a new writing key, the old one wrong
}
ERRORS: dict[str, type[safepoint.SafepointError]] = {
    "keyless": safepoint.EncryptedStore,
    "wrong-kek": safepoint.InvalidKey,
    "wrong-index": safepoint.InvalidKey,
    "wrong-old-kek": safepoint.InvalidKey,
}
SAYS = {"keyless": "encrypted", "wrong-kek": "key k1", "wrong-index": "index key", "wrong-old-kek": "key k1"}
RUN_IDS = ("a", "b")


class Backend:
    """One store (a SQLite file or a PostgreSQL schema): its URL, and everything it holds as stored."""

    def __init__(self, url: str, snapshot: Callable[[], Any], sql: Callable[..., list[Any]]) -> None:
        self.url, self.snapshot, self.sql = url, snapshot, sql


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        path = tmp_path / "state.db"

        def files() -> dict[str, bytes]:
            # Every page of the file, and what its WAL holds, byte for byte. Not the file's 100-byte
            # header, whose change counter SQLite bumps when any writable connection closes, nor the
            # -shm index; an empty -wal (left by a read-only open) holds nothing.
            wal = tmp_path / "state.db-wal"
            return {"pages": path.read_bytes()[100:], "wal": wal.read_bytes() if wal.exists() else b""}

        yield Backend(f"sqlite:///{path}", files, lambda q, *p: sqlite_rows(path, q, p))
        return
    dsn, schema = request.getfixturevalue("postgres_dsn"), request.getfixturevalue("pg_schema")

    def rows() -> dict[str, list[Any]]:  # every row of every table, as a raw SELECT sees it
        tables = raw(dsn, schema, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        return {t: sorted(map(repr, raw(dsn, schema, f"SELECT * FROM {t}"))) for (t,) in sorted(tables)}

    def sql(query: str, *params: Any) -> list[Any]:
        return raw(dsn, schema, query.replace("?", "%s"), params)  # type: ignore[arg-type]

    yield Backend(f"{dsn}?schema={schema}", rows, sql)


def ring(text: str) -> Keyring:
    return Keyring.from_text(text)


def filled(url: str) -> None:
    store = safepoint.open_store(url, encryption=ring(RIGHT))
    for run_id in RUN_IDS:
        for step in range(2):
            store.save(Checkpoint(run_id=run_id, step=step, labels={"team": run_id}, state={"n": step}))
    store.close()


def listing_intact(url: str) -> None:
    store = safepoint.open_store(url, encryption=ring(RIGHT), read_only=True)
    assert sorted(r.run_id for r in store.runs()) == list(RUN_IDS)
    assert [r.run_id for r in store.runs(labels={"team": "b"})] == ["b"]
    assert all(store.load(run_id).state == {"n": 1} for run_id in RUN_IDS)
    store.close()


@pytest.mark.parametrize("case", list(CASES))
def test_a_process_without_the_right_keys_is_refused_at_open_and_writes_nothing(
    backend: Backend, case: str
) -> None:
    """Keyless, wrong KEK, wrong index key: the typed error at open (read-write and read-only), the
    store's bytes/rows unchanged, and the keyed listing whole afterwards."""
    filled(backend.url)
    before = backend.snapshot()
    for read_only in (False, True):
        options: dict[str, Any] = {"read_only": read_only}
        if CASES[case] is not None:
            options["encryption"] = ring(CASES[case])
        with pytest.raises(ERRORS[case], match=SAYS[case]) as caught:
            safepoint.open_store(backend.url, **options)
        assert WRONG[:8] not in str(caught.value)
        assert K1[:8] not in str(caught.value)
    assert backend.snapshot() == before
    listing_intact(backend.url)


def test_the_async_store_refuses_the_same_at_open(backend: Backend) -> None:
    """open_async_store (SQLite through its thread, PostgreSQL natively): the same errors, nothing written."""
    filled(backend.url)
    before = backend.snapshot()

    async def each() -> None:
        for case, text in CASES.items():
            options = {} if text is None else {"encryption": ring(text)}
            with pytest.raises(ERRORS[case], match=SAYS[case]):
                await safepoint.open_async_store(backend.url, **options)
        store = await safepoint.open_async_store(backend.url, encryption=ring(RIGHT))
        assert sorted(r.run_id for r in await store.runs()) == list(RUN_IDS)
        await store.close()

    asyncio.run(each())
    assert backend.snapshot() == before


def test_a_store_being_converted_refuses_a_keyless_open(tmp_path: Path) -> None:
    """Once safepoint encrypt has begun (the store converting), a writer without the keys is refused too."""
    url = f"sqlite:///{tmp_path}/state.db"
    plain = safepoint.open_store(url)
    plain.save(Checkpoint(run_id="a", state={"words": "private"}))
    plain.close()
    safepoint.open_store(url, encryption=ToEncrypt(ring(RIGHT))).close()  # what encrypt's open does first
    assert dict(sqlite_rows(tmp_path / "state.db", "SELECT name, value FROM safepoint_meta"))[STATE] == (
        "converting"
    )
    with pytest.raises(safepoint.EncryptedStore):
        safepoint.open_store(url)
    converting = safepoint.open_store(url, encryption=ring(RIGHT))
    assert converting.load("a").state == {"words": "private"}  # the keyring reads it meanwhile
    converting.close()


@pytest.mark.parametrize("case", list(CASES))
def test_the_cli_says_one_line_and_exits_2(tmp_path: Path, case: str) -> None:
    """safepoint runs without the right keys: one 'error:' line naming the problem, exit 2, no traceback."""
    url = f"sqlite:///{tmp_path}/state.db"
    filled(url)
    args = ["runs", "--store", url]
    if CASES[case] is not None:
        keys = tmp_path / "keys.txt"
        keys.write_text(CASES[case].replace(" ", "\n") + "\n")
        keys.chmod(0o600)
        args += ["--key-file", str(keys)]
    result = sp(tmp_path, *args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert SAYS[case] in lines[0]
    assert "Traceback" not in result.stderr
    assert "SealBroken" not in result.stderr


def test_a_key_file_open_to_other_users_is_refused(tmp_path: Path) -> None:
    """A key file with group or other mode bits: InvalidKey naming its path, not its content (code, CLI)."""
    url = f"sqlite:///{tmp_path}/state.db"
    filled(url)
    keys = key_file(tmp_path, "keys.txt", "k1")
    for mode in (0o644, 0o640, 0o604, 0o620):
        keys.chmod(mode)
        with pytest.raises(safepoint.InvalidKey, match=r"keys\.txt.*open to other users") as caught:
            Keyring.from_file(keys)
        assert K1[:8] not in str(caught.value)
        assert f"{mode:04o}" in str(caught.value)
    result = sp(tmp_path, "runs", "--store", url, "--key-file", str(keys))
    assert result.returncode == 2
    assert "chmod 600" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    keys.chmod(0o400)
    assert Keyring.from_file(keys).writing_id == "k1"


BAD = "bad\x1b]0;title\x07"  # a run id with a terminal escape in it, as an attacker could choose


def test_rekey_finishes_every_other_run_and_lists_the_corrupt_one(tmp_path: Path) -> None:
    """rekey with one corrupt run: the others re-sealed, the corrupt run listed escaped, exit 4; a
    rerun finds nothing else to do and still lists it."""
    url, path = f"sqlite:///{tmp_path}/state.db", tmp_path / "state.db"
    store = safepoint.open_store(url, encryption=ring(RIGHT))
    for run_id in ("a", BAD, "c"):
        store.save(Checkpoint(run_id=run_id, state={"n": 1}))
    store.close()
    ((header,),) = sqlite_rows(
        path, "SELECT header FROM safepoint_checkpoints WHERE id = ?", (sqlite_key(path, BAD, 0),)
    )
    sqlite_rows(
        path,
        "UPDATE safepoint_checkpoints SET header = ? WHERE id = ?",
        (flipped(header), sqlite_key(path, BAD, 0)),
    )
    both = key_file(tmp_path, "both.txt", "k1", "k2")
    first = sp(tmp_path, "rekey", "--store", url, "--key-file", str(both))
    assert first.returncode == 4, first.stdout + first.stderr
    assert "\x1b" not in first.stdout  # the id shown escaped, never raw
    assert "\\x1b" in first.stdout
    assert "could not seal 1" in first.stdout
    assert "Traceback" not in first.stderr
    again = sp(tmp_path, "rekey", "--store", url, "--key-file", str(both), "--json")
    assert again.returncode == 4
    report = json.loads(again.stdout)
    assert report["rows"] == 0  # every other run is under the new data key already
    assert [(f["kind"], f["id"], f["type"]) for f in report["failed"]] == [("run", BAD, "CorruptCheckpoint")]
    new_only = safepoint.open_store(url, encryption=ring(f"index:{INDEX} k2:{K2}"), read_only=True)
    assert [new_only.load(r).state for r in ("a", "c")] == [{"n": 1}, {"n": 1}]
    new_only.close()


def test_encrypt_finishes_every_other_run_and_stays_converting_until_the_bad_one_is_gone(
    tmp_path: Path,
) -> None:
    """encrypt with a run whose row is damaged: the others sealed, that run listed, exit 4, the store
    left converting; once it is deleted, a rerun marks the store encrypted and no plaintext is left."""
    url, path = f"sqlite:///{tmp_path}/state.db", tmp_path / "state.db"
    store = safepoint.open_store(url)
    for run_id in ("a", "b", "c"):
        store.save(Checkpoint(run_id=run_id, state={"words": f"private {run_id}"}, labels={"k": run_id}))
    store.close()
    sqlite_rows(path, "UPDATE safepoint_runs SET labels = '{' WHERE run_id = 'b'")  # not JSON any more
    keys = key_file(tmp_path, "keys.txt", "k1")
    first = sp(tmp_path, "encrypt", "--store", url, "--key-file", str(keys), "--json")
    assert first.returncode == 4, first.stderr
    assert [f["id"] for f in json.loads(first.stdout)["failed"]] == ["b"]
    meta = dict(sqlite_rows(path, "SELECT name, value FROM safepoint_meta"))
    assert meta[STATE] == "converting"
    store = safepoint.open_store(url, encryption=ring(RIGHT))
    assert store.load("c").state == {"words": "private c"}
    store.delete_run("b")
    store.close()
    rerun = sp(tmp_path, "encrypt", "--store", url, "--key-file", str(keys))
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert dict(sqlite_rows(path, "SELECT name, value FROM safepoint_meta"))[STATE] == "encrypted"
    assert b"private" not in b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))


def test_a_store_made_before_the_check_value_gets_it_only_from_a_verified_index_key(backend: Backend) -> None:
    """No check value (a store made before it): a wrong index key is refused by a head's keyed
    digest and writes nothing; a read-only open verifies but writes nothing; the right read-write
    open writes it; an empty store gets it at once."""
    filled(backend.url)
    backend.sql("DELETE FROM safepoint_meta WHERE name = ?", INDEX_CHECK_NAME)
    before = backend.snapshot()
    with pytest.raises(safepoint.InvalidKey, match="index key"):
        safepoint.open_store(backend.url, encryption=ring(CASES["wrong-index"]))
    safepoint.open_store(backend.url, encryption=ring(RIGHT), read_only=True).close()
    assert backend.snapshot() == before
    safepoint.open_store(backend.url, encryption=ring(RIGHT)).close()
    meta = dict(backend.sql("SELECT name, value FROM safepoint_meta"))
    assert meta[INDEX_CHECK_NAME] == index_check(base64.b64decode(INDEX), meta[STORE_ID])
    with pytest.raises(safepoint.InvalidKey, match="check value"):
        safepoint.open_store(backend.url, encryption=ring(CASES["wrong-index"]))
    listing_intact(backend.url)
    store = safepoint.open_store(backend.url, encryption=ring(RIGHT))
    for run_id in RUN_IDS:
        store.delete_run(run_id)
    store.close()
    backend.sql("DELETE FROM safepoint_meta WHERE name = ?", INDEX_CHECK_NAME)
    safepoint.open_store(backend.url, encryption=ring(RIGHT)).close()  # empty: nothing to disagree with
    assert INDEX_CHECK_NAME in dict(backend.sql("SELECT name, value FROM safepoint_meta"))


FORKED = """
import ctypes, os, sys
from safepoint.crypto import sealing
sealing._NONCES.next()  # a batch drawn in the parent
libc = ctypes.CDLL(None)
read, write = os.pipe()
pid = libc.fork()  # libc's fork: Python's at-fork hooks do not run in the child
if pid == 0:
    os.write(write, sealing._NONCES.next())
    os._exit(0)
os.waitpid(pid, 0)
child, parent = os.read(read, 64), sealing._NONCES.next()
print("reused" if child == parent else "fresh")
"""


def test_a_child_forked_by_libc_draws_its_own_nonces() -> None:
    """A real libc fork() (ctypes: no at-fork hook runs): the child's next nonce is not the parent's."""
    result = subprocess.run([sys.executable, "-c", FORKED], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "fresh"
