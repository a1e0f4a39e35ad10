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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from safepoint.crypto.sealing import is_sealed, unwrap, wrap
from safepoint.errors import InvalidArgument

from .calls import now_micros
from .encryption import STATE, open_sealer
from .facade import Store
from .ops.resealing import reseal_blobs, reseal_run, scrub_free_pages, sealed_key_ids
from .query import Query
from .sealed_blobs import SealedBlobs
from .sealer import Sealer

Progress = Callable[[int, int], None]  # (runs done, runs in all)
_PAGE = 200


@dataclass(slots=True)
class Resealing:
    """What an encrypt or a rekey did: runs and rows sealed anew, blobs, data keys rewrapped."""

    runs: int = 0
    rows: int = 0
    blobs: int = 0
    rewrapped: int = 0


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
    """Convert ``store`` (opened without a keyring) to an encrypted store under ``keyring``."""
    if store.pipeline.sealer is not None and not store.pipeline.sealer.converting:
        raise InvalidArgument("the store is encrypted already: rekey it instead")
    sealer = store.driver.run(
        open_sealer(keyring, writable=True, now=now_micros(), converting=True), write=True
    )
    if store.pipeline.sealer is None:
        store.pipeline.encrypt(sealer)
    done = _reseal_everything(store, sealer, progress)
    store.driver.run(_mark_encrypted(), write=True)
    if store.driver.dialect == "sqlite":
        store.driver.run(scrub_free_pages(), write=True)
    return done


def rekey_store(store: Store, *, progress: Progress | None = None) -> Resealing:
    """Rewrap every data key under the keyring's writing key, then re-seal every value under the newest."""
    sealer = _sealer_of(store)
    rewrapped = store.driver.run(_rewrap_all(sealer), write=True)
    done = _reseal_everything(store, sealer, progress)
    done.rewrapped = rewrapped
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
    from safepoint.crypto.sealing import key_id_of  # noqa: PLC0415

    return Counter(key_id_of(value) for value in values)


# -- the walks -----------------------------------------------------------------


def _reseal_everything(store: Store, sealer: Sealer, progress: Progress | None) -> Resealing:
    done = Resealing()
    runs = list(_all_runs(store))
    for index, (run_ref, run_id) in enumerate(runs, 1):
        result = store.driver.run(reseal_run(run_ref, run_id, sealer), write=True)
        done.runs += bool(result.rows or result.run_row)
        done.rows += result.rows
        if progress is not None:
            progress(index, len(runs))
    done.blobs = _reseal_blobs(store, sealer)
    return done


def _all_runs(store: Store) -> Iterator[tuple[int, str]]:
    after = 0
    while True:
        page = store.driver.run(_runs_after(after), write=False)
        yield from ((row.run_ref, row.run_id) for row in page)
        if len(page) < _PAGE:
            return
        after = page[-1].run_ref


def _reseal_blobs(store: Store, sealer: Sealer) -> int:
    blobs = store.pipeline.blobs
    if blobs is None:
        return 0
    if blobs.in_database:
        changed, after = 0, ""
        while True:
            count, page_end = store.driver.run(reseal_blobs(after, _PAGE, sealer), write=True)
            changed += count
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
        data = sealer.open_blob(info.digest, stored)
        external.put_sealed(info.digest, sealer.seal_blob(info.digest, data), replace=True)
        changed += 1
    return changed


def _stored_blobs(store: Store, sealer: Sealer) -> Iterator[bytes]:
    blobs = store.pipeline.blobs
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
    sealer = store.pipeline.sealer
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


def _rewrap_all(sealer: Sealer) -> Any:
    """Every data key wrapped under the writing keyring key; how many were rewrapped."""
    keyring, changed = sealer.keyring, 0
    for row in (yield Query("data_keys")):
        if row.kek_id == keyring.writing_id:
            continue
        data_key = unwrap(keyring, row.kek_id, bytes(row.wrapped), sealer.store_id, row.key_id)
        kek_id, wrapped = wrap(keyring, data_key, sealer.store_id)
        yield Query("rewrap_data_key", {"key_id": row.key_id, "kek_id": kek_id, "wrapped": wrapped})
        changed += 1
    sealer.learn((yield Query("data_keys")))
    return changed
