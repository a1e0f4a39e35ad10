"""The call journal on an encrypted store (issue 32, item 1): no plaintext of a result in the
SQLite file, its WAL, the blob files or any PostgreSQL column (canaries searched in every
encoding; the control, unencrypted, finds them); a process without the keyring is refused
(``EncryptedStore``); a result row copied under another key, step or run does not open
(``CorruptCheckpoint``); requests compare by keyed digest. ``encrypt_store`` seals the
entries of a plaintext store (their requests keyed, so a recorded intent still matches) and
``rekey_store`` moves them to the new data key.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import safepoint
from journal_stores import Backend, backends, started
from safepoint import CorruptCheckpoint, EncryptedStore, Keyring
from safepoint.crypto.sealing import key_id_of
from safepoint.store.keys import encrypt_store, key_status, rekey_store
from test_leak import canaries, hits, needles

SEALED = ("memory", "sqlite", "sqlite-async", "postgres", "postgres-async")
DURABLE = ("sqlite", "postgres")


def key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def keyring_text() -> str:
    return f"index:{key()} k1:{key()}"


def new_keyring() -> Keyring:
    return Keyring.from_text(keyring_text())


@pytest.fixture(params=SEALED)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backends(request.param, tmp_path)


@pytest.fixture(params=DURABLE)
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backends(request.param, tmp_path)


def _record_canaries(store: Any, secrets: dict[str, str]) -> None:
    """Canaries in short results, large text (to the blob target), bytes, usage-free."""
    values = list(secrets.values())
    for run in range(3):
        started(store, f"run-{run}", 2)
        for n, value in enumerate(values[run * 10 : run * 10 + 10]):
            result: Any = {"text": f"said {value}", "list": [value]}
            if n % 3 == 1:
                result = {"long": (value + " ") * 40}
            elif n % 3 == 2:
                result = (value * 30).encode()
            store.record_call(f"run-{run}", f"call-{n}", result, request={"asked": value})
            store.call_intent(f"run-{run}", f"intent-{n}", request={"asked": value})


def _everything(backend: Backend) -> bytes:
    """Every byte the store wrote: SQLite's files and blob folder, or PostgreSQL's rows."""
    if backend.kind == "sqlite":
        return b"".join(p.read_bytes() for p in sorted(backend.folder.rglob("*")) if p.is_file())
    tables = backend.raw(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    )
    out = []
    for (table,) in tables:
        for row in backend.raw(f'SELECT * FROM "{table}"'):
            out += [bytes(v) if isinstance(v, bytes | memoryview) else str(v).encode() for v in row]
    return b"\n".join(out)


@pytest.mark.parametrize("encrypted", [True, False], ids=["encrypted", "control"])
def test_no_result_canary_is_stored_in_plain_text(durable: Backend, encrypted: bool) -> None:
    secrets = canaries()
    options: dict[str, Any] = {"scrubber": False, "blob_threshold": 128}
    if durable.kind == "sqlite":
        options["wal_autocheckpoint"] = 0  # the WAL keeps every page written
    if encrypted:
        options["encryption"] = new_keyring()
    store = durable.open(**options)
    _record_canaries(store, secrets)
    found = hits(needles(secrets), _everything(durable))
    if encrypted:
        assert found == []
        entry = store.recorded_call("run-0", "call-0", request={"asked": next(iter(secrets.values()))})
        assert entry is not None
        assert entry.same_request is True  # the keyed digests compare
    else:
        assert len(found) >= 25  # the control: the search sees results (requests are digests)


def test_a_process_without_the_keyring_is_refused(durable: Backend) -> None:
    store = durable.open(encryption=new_keyring())
    started(store, "run")
    store.record_call("run", "k", {"r": 1})
    with pytest.raises(EncryptedStore):
        safepoint.open_store(durable.url, **({"schema": durable.schema} if durable.schema else {}))


def _copy(backend: Backend, source: tuple[str, str], target: tuple[str, str]) -> None:
    """Copy the stored result of entry ``source`` (run, key) over entry ``target``'s."""
    if backend.dialect == "sqlite":
        backend.raw(
            "UPDATE safepoint_calls SET result = (SELECT c.result FROM safepoint_calls c"
            " JOIN safepoint_runs r ON r.id = c.run_ref WHERE r.run_id = ? AND c.key = ?)"
            " WHERE key = ? AND run_ref = (SELECT id FROM safepoint_runs WHERE run_id = ?)",
            (source[0], source[1], target[1], target[0]),
        )
        return
    backend.raw(
        "UPDATE safepoint_calls SET result = (SELECT c.result FROM safepoint_calls c"
        " JOIN safepoint_runs r ON r.id = c.run_ref WHERE r.run_id = %(srun)s AND c.key = %(skey)s)"
        " WHERE key = %(tkey)s AND run_ref = (SELECT id FROM safepoint_runs WHERE run_id = %(trun)s)",
        {"srun": source[0], "skey": source[1], "trun": target[0], "tkey": target[1]},
    )


def test_a_result_moved_to_another_place_does_not_open(backend: Backend) -> None:
    store = backend.open(encryption=new_keyring())
    for run_id in ("a", "b"):
        started(store, run_id)
        store.record_call(run_id, "k1", {"for": run_id, "key": "k1"})
        store.record_call(run_id, "k2", {"for": run_id, "key": "k2"})
    _copy(backend, ("a", "k1"), ("a", "k2"))  # under another key of the run
    _copy(backend, ("a", "k1"), ("b", "k1"))  # under the same key of another run
    for run_id, key in (("a", "k2"), ("b", "k1")):
        with pytest.raises(CorruptCheckpoint):
            store.recorded_call(run_id, key)
        with pytest.raises(CorruptCheckpoint):
            store.recorded_calls(run_id)
    assert store.recorded_call("a", "k1").result == {"for": "a", "key": "k1"}  # type: ignore[union-attr]
    assert store.recorded_call("b", "k2").result == {"for": "b", "key": "k2"}  # type: ignore[union-attr]
    backend.raw("UPDATE safepoint_calls SET step = step + 1")  # under another step
    with pytest.raises(CorruptCheckpoint):
        store.recorded_call("a", "k1")
    with pytest.raises(CorruptCheckpoint):  # a second writer reads the stored entry back: refused too
        store.record_call("b", "k2", "again")


def test_requests_are_stored_as_keyed_digests(backend: Backend) -> None:
    store = backend.open(encryption=new_keyring())
    started(store, "run")
    request = {"prompt": "hello"}
    store.call_intent("run", "k", request=request)
    found = store.recorded_call("run", "k", request=request)
    assert found is not None
    assert found.same_request is True
    assert store.recorded_call("run", "k", request={"prompt": "other"}).same_request is False  # type: ignore[union-attr]
    plain = hashlib.sha256(b"safepoint-call-request\x1f" + b'{"prompt":"hello"}').digest()
    ((stored,),) = backend.raw("SELECT request FROM safepoint_calls")
    assert bytes(stored) != plain  # keyed under the store's index key, as a head digest is


def test_encrypt_store_seals_the_journal(durable: Backend) -> None:
    secrets = canaries()
    value = next(iter(secrets.values()))
    options: dict[str, Any] = {"scrubber": False, "blob_threshold": 128}
    store = durable.open(**options)
    _record_canaries(store, secrets)
    keyring = new_keyring()
    done = encrypt_store(store, keyring)
    assert done.ok
    store.close()
    durable.opened.remove(store)
    sealed = durable.open(encryption=keyring, **options)
    assert hits(needles(secrets), _everything(durable)) == []
    entry = sealed.recorded_call("run-0", "call-0", request={"asked": value})
    assert entry is not None
    assert entry.result == {"text": f"said {value}", "list": [value]}
    assert entry.same_request is True  # a request recorded before the encryption still matches
    intent = sealed.recorded_call("run-0", "intent-0", request={"asked": value})
    assert intent is not None
    assert (intent.state, intent.same_request) == ("intent", True)
    assert key_status(sealed).plaintext == 0


def test_rekey_moves_the_journal_to_the_new_data_key(durable: Backend) -> None:
    text = keyring_text()
    store = durable.open(encryption=Keyring.from_text(text))
    started(store, "run")
    store.record_call("run", "k", {"r": "before the rekey"}, request={"q": 1})
    store.call_intent("run", "i", request={"q": 2})
    before = key_status(store)
    assert sum(before.by_data_key.values()) >= 3  # the checkpoint's values and the entry's result
    store.close()
    durable.opened.remove(store)
    rotated = Keyring.from_text(f"{text} k2:{key()}")  # the new last key writes
    store = durable.open(encryption=rotated)
    done = rekey_store(store)
    assert done.ok
    status = key_status(store)
    assert len(status.by_data_key) == 1  # the old data key protects nothing, entries included
    ((header,),) = durable.raw("SELECT header FROM safepoint_checkpoints")
    ((result,),) = durable.raw("SELECT result FROM safepoint_calls WHERE result IS NOT NULL")
    assert key_id_of(bytes(result)) == key_id_of(bytes(header))  # resealed with the checkpoint
    entry = store.recorded_call("run", "k", request={"q": 1})
    assert entry is not None
    assert (entry.result, entry.same_request) == ({"r": "before the rekey"}, True)
    assert store.recorded_call("run", "i", request={"q": 2}).same_request is True  # type: ignore[union-attr]
