"""Operators' key work on a whole store: ``encrypt_store``, ``rekey_store``, ``key_status``.

Each works a run per transaction (the run locked meanwhile, so writers of
that run wait for it and no other), then the blobs, so it may be stopped at
any instant — a kill included — and run again to finish: what is already
under the writing data key is left alone. Runs keep saving throughout.

* ``encrypt_store`` converts a plaintext store: it gives the store its id
  and a data key and marks it *converting* (every opener with a keyring then
  reads plaintext rows as well as sealed ones), seals every run and blob,
  then marks it encrypted: from then on a plaintext row is an error. Blobs
  stored before keep their SHA-256 names, which their references hold.
* ``rekey_store`` moves everything to the keyring's writing key: first it
  rewraps every data key under that key (one row each, at once: the old
  keys then protect nothing), then re-seals every row and blob under the
  newest data key, so that an old data key protects nothing either.
* ``key_status`` counts the values each data key seals, and each keyring
  key wraps, and the plaintext values left.

A run that cannot be sealed again (its rows damaged, or under a key the
keyring lacks or that is not the store's) does not stop either walk: it is
left as it is and listed in ``Resealing.failed``, and every other run is
done. ``encrypt_store`` then leaves the store *converting* (plaintext still
read), so that a rerun after the listed runs are repaired or deleted
finishes the conversion.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from safepoint.crypto.sealing import is_sealed
from safepoint.crypto.wrapping import unwrap_for_store, wrap
from safepoint.errors import (
    BlobCorrupt,
    CorruptCheckpoint,
    InvalidArgument,
    InvalidKey,
    MissingKey,
    SafepointError,
    StoreError,
)
from safepoint.records import now_micros

from .encryption import STATE, ToEncrypt, open_sealer
from .facade import Store
from .ops.resealing import Resealed, key_of, reseal_blobs, reseal_run, scrub_free_pages, sealed_key_ids
from .query import Query
from .sealed_blobs import SealedBlobs
from .sealer import Sealer, UnknownDataKey

__all__ = ["KeyStatus", "Progress", "Resealing", "ToEncrypt", "encrypt_store", "key_status", "rekey_store"]

Progress = Callable[[int, int], None]  # (runs done, runs in all)
_PAGE = 200


@dataclass(slots=True)
class Resealing:
    """What an encrypt or a rekey did: runs and rows sealed anew, blobs, data keys rewrapped, and
    the runs (by id) and blobs (by digest) it could not seal, each with its typed error."""

    runs: int = 0
    rows: int = 0
    blobs: int = 0
    rewrapped: int = 0
    failed: list[tuple[str, SafepointError]] = field(default_factory=list)
    failed_blobs: list[tuple[str, SafepointError]] = field(default_factory=list)
    failed_keys: list[tuple[str, SafepointError]] = field(default_factory=list)  # data keys not rewrapped

    @property
    def ok(self) -> bool:
        """Whether every run, blob and data key is under the writing keys now."""
        return not self.failed and not self.failed_blobs and not self.failed_keys


@dataclass(slots=True)
class KeyStatus:
    """What each key protects: values per data key, the keyring key wrapping each, plaintext left."""

    by_data_key: Counter[str] = field(default_factory=Counter)
    wrapped_by: dict[str, str] = field(default_factory=dict)
    plaintext: int = 0
    keyring_ids: tuple[str, ...] = ()

    def by_keyring_key(self) -> dict[str, int]:
        """Values protected by each keyring key (through the data keys it wraps); 0 for one wrapping none."""
        out: dict[str, int] = dict.fromkeys((*self.keyring_ids, *self.wrapped_by.values()), 0)
        for data_key, count in self.by_data_key.items():
            kek = self.wrapped_by.get(data_key, "?")
            out[kek] = out.get(kek, 0) + count
        return out


def encrypt_store(store: Store, keyring: Any, *, progress: Progress | None = None) -> Resealing:
    """Convert ``store`` to an encrypted store under ``keyring``.

    ``store``: a plaintext store opened without a keyring, or any store opened with
    ``encryption=ToEncrypt(keyring)`` — what reopens a store an interrupted encrypt left
    converting, which a keyless open refuses (``EncryptedStore``). The store is marked encrypted
    only when every run and blob was sealed (``Resealing.ok``)."""
    if store.settings.sealer is not None and not store.settings.sealer.converting:
        raise InvalidArgument("the store is encrypted already: rekey it instead")
    sealer = store.driver.run(
        open_sealer(keyring, writable=True, now=now_micros(), converting=True), write=True
    )
    if store.settings.sealer is None:
        store.settings = store.settings.encrypted(sealer)
    done = _reseal_everything(store, sealer, progress)
    if not done.ok:
        return done  # still converting: the runs left in plain text stay readable until a rerun
    store.driver.run(_mark_encrypted(), write=True)
    store.driver.run(scrub_free_pages(), write=True)  # SQLite's free pages and WAL; nothing on PostgreSQL
    return done


def rekey_store(store: Store, *, progress: Progress | None = None) -> Resealing:
    """Rewrap every data key under the keyring's writing key, then re-seal every value under the newest."""
    sealer = _sealer_of(store)
    failed_keys: list[tuple[str, SafepointError]] = []
    rewrapped = store.driver.run(_rewrap_all(sealer, failed_keys), write=True)
    done = _reseal_everything(store, sealer, progress)
    done.rewrapped, done.failed_keys = rewrapped, failed_keys
    return done


def key_status(store: Store) -> KeyStatus:
    """Count what each key id protects (reads every sealed value's key id; changes nothing)."""
    sealer = _sealer_of(store)
    status = KeyStatus(keyring_ids=sealer.keyring.ids)
    for row in store.driver.run(_data_keys(), write=False):
        status.wrapped_by[row.key_id] = row.kek_id
    for run_ref, run_id in _all_runs(store):
        del run_id
        ids, plain = store.driver.run(sealed_key_ids(run_ref), write=False)
        status.by_data_key.update(ids)
        status.plaintext += plain
    for sealed in _stored_blobs(store, sealer):
        if is_sealed(sealed):
            status.by_data_key.update(sealed_key_ids_of([sealed]))
        else:
            status.plaintext += 1
    return status


def sealed_key_ids_of(values: list[bytes]) -> Counter[str]:
    """The data key ids of sealed values, counted; ``DAMAGED`` for one whose id cannot be read
    (a cut blob: opening it says ``BlobCorrupt``)."""
    return Counter(key_of(value) or DAMAGED for value in values)


DAMAGED = "<damaged>"


# -- the walks -----------------------------------------------------------------


def _reseal_everything(store: Store, sealer: Sealer, progress: Progress | None) -> Resealing:
    done = Resealing()
    runs = list(_all_runs(store))
    for index, (run_ref, run_id) in enumerate(runs, 1):
        try:
            result = _reseal_one(store, run_ref, run_id, sealer)
        except StoreError:
            raise  # the backend failed: stop, and a rerun goes on from here
        except SafepointError as exc:  # this run's rows: damaged, or under a key that does not open them
            done.failed.append((run_id, exc))
        except (TypeError, ValueError, KeyError):  # a column edited into another type or shape
            done.failed.append((run_id, CorruptCheckpoint(run_id, None, _NOT_ROWS)))
        else:
            done.runs += bool(result.rows or result.run_row)
            done.rows += result.rows
        if progress is not None:
            progress(index, len(runs))
    done.blobs = _reseal_blobs(store, sealer, done.failed_blobs)
    return done


_NOT_ROWS = "its stored rows are not in the form safepoint writes them"


def _reseal_one(store: Store, run_ref: int, run_id: str, sealer: Sealer) -> Resealed:
    try:
        return store.driver.run(reseal_run(run_ref, run_id, sealer), write=True)
    except UnknownDataKey:  # a process opened the store with a new writing key since: read its data key
        sealer.learn(store.driver.run(_data_keys(), write=False))
        return store.driver.run(reseal_run(run_ref, run_id, sealer), write=True)


def _all_runs(store: Store) -> Iterator[tuple[int, str]]:
    after = 0
    while True:
        page = store.driver.run(_runs_after(after), write=False)
        yield from ((row.run_ref, row.run_id) for row in page)
        if len(page) < _PAGE:
            return
        after = page[-1].run_ref


def _reseal_blobs(store: Store, sealer: Sealer, failed: list[tuple[str, SafepointError]]) -> int:
    blobs = store.settings.blobs
    if blobs is None:
        return 0
    if blobs.in_database:
        changed, after = 0, ""
        while True:
            count, page_end, page_failed = store.driver.run(reseal_blobs(after, _PAGE, sealer), write=True)
            changed += count
            failed += page_failed
            if page_end is None:
                return changed
            after = page_end
    assert isinstance(blobs, SealedBlobs)
    assert blobs.external is not None
    external, changed = blobs.external, 0
    for info in list(external.scan()):
        stored = external.get_sealed(info.digest)
        if is_sealed(stored) and sealed_key_ids_of([stored]).get(sealer.writing.key_id):
            continue
        try:
            data = sealer.open_blob(info.digest, stored)
        except (BlobCorrupt, MissingKey, InvalidKey) as exc:  # damaged, or a key missing or wrong
            failed.append((info.digest, exc))
            continue
        external.put_sealed(info.digest, sealer.seal_blob(info.digest, data), replace=True)
        changed += 1
    return changed


def _stored_blobs(store: Store, sealer: Sealer) -> Iterator[bytes]:
    blobs = store.settings.blobs
    if blobs is None:
        return
    if blobs.in_database:
        after: str | None = ""
        while after is not None:
            page = store.driver.run(_blobs_after(after), write=False)
            yield from (bytes(row.data) for row in page)
            after = page[-1].digest if len(page) == _PAGE else None
        return
    assert isinstance(blobs, SealedBlobs)
    assert blobs.external is not None
    for info in blobs.external.scan():
        yield blobs.external.get_sealed(info.digest)
    del sealer


def _sealer_of(store: Store) -> Sealer:
    sealer = store.settings.sealer
    if sealer is None:
        raise InvalidArgument("the store was opened without a keyring: give it the keys")
    return sealer


# -- the small operations ------------------------------------------------------


def _runs_after(after: int) -> Any:
    return (yield Query("runs_after", {"after_ref": after, "limit": _PAGE}))


def _blobs_after(after: str) -> Any:
    return (yield Query("blobs_after", {"after_digest": after, "limit": _PAGE}))


def _data_keys() -> Any:
    return (yield Query("data_keys"))


def _mark_encrypted() -> Any:
    yield Query("replace_store_meta", {"name": STATE, "value": "encrypted"})


def _rewrap_all(sealer: Sealer, failed: list[tuple[str, SafepointError]]) -> Any:
    """Every data key wrapped under the writing keyring key; how many were rewrapped. One the
    keyring cannot open is added to ``failed`` and left as it is (the runs under it fail too)."""
    keyring, changed = sealer.keyring, 0
    failed.clear()  # the op may be run again (a retried transaction)
    for row in (yield Query("data_keys")):
        if row.kek_id == keyring.writing_id:
            continue
        try:
            data_key = unwrap_for_store(keyring, row.kek_id, bytes(row.wrapped), sealer.store_id, row.key_id)
        except (MissingKey, InvalidKey) as exc:
            failed.append((str(row.key_id), exc))
            continue
        kek_id, wrapped = wrap(keyring, data_key, sealer.store_id)
        yield Query("rewrap_data_key", {"key_id": row.key_id, "kek_id": kek_id, "wrapped": wrapped})
        changed += 1
    sealer.learn((yield Query("data_keys")))
    return changed
