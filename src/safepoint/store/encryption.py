"""Opening a store with or without ``encryption=``: its id, data keys and index key, checked at open.

The first read-write open with a keyring gives the store its id
(``safepoint_meta``), the check value of its index key, and a data key
wrapped under the keyring's writing key (``safepoint_data_keys``). Every
later open reads them; it adds a data key when none is wrapped under the
writing key yet (a key was added to the keyring: new values are sealed
under the new data key, old ones still open under theirs). A read-only
open writes nothing: it seals nothing either, so it takes the newest data
key it finds.

Every seam fails closed here, before anything is written:

* an open without a keyring of a store that has an id (encrypted, or being
  converted by ``safepoint encrypt``) is ``EncryptedStore`` — one read of
  ``safepoint_meta``, so a process missing its keys never writes plaintext;
* a tenant ``safepoint tenant erase`` is erasing (its meta holds the mark,
  ``ops/erasing.ERASING``) is ``StoreNotFound`` for every open, keyless or
  not: its data keys may be gone already, and an open with its keyring would
  make it a new one and write beside what the erase deletes;
* a keyring key that does not open a data key wrapped under its id is
  ``InvalidKey`` naming both ids (``wrapping.unwrap_for_store``): each data key whose
  keyring key is in memory is unwrapped at open to find out;
* the index key is checked against the store's check value (a keyed digest
  of the store id under it): another index key is ``InvalidKey``. A store
  made before the check value existed gets it only once the index key has
  verified the keyed digest of a run's head checkpoint; an empty one gets
  it at once; a wrong index key never writes it.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from safepoint import codec
from safepoint.crypto.keyed import CHECKPOINT_DIGEST, INDEX_CHECK, keyed_digest
from safepoint.crypto.keyring import INDEX_ID
from safepoint.crypto.sealing import Place, SealBroken, is_sealed, parts
from safepoint.crypto.wrapping import unwrap_for_store
from safepoint.errors import (
    EncryptedStore,
    InvalidArgument,
    InvalidKey,
    MissingKey,
    NotEncrypted,
    StoreNotFound,
)

from .ops.erasing import ERASING
from .query import Op, Query
from .sealer import Sealer

STORE_ID = "store_id"
STATE = "encryption"  # "converting" while safepoint encrypt runs, then "encrypted"
INDEX_CHECK_NAME = "index_check"  # the index key's check value, hex
_HEADS_TRIED = 8  # runs whose head may verify the index key of a store made before its check value
_ANY_RUN = {
    "statuses": None,
    "labels": None,
    "updated_since": None,
    "updated_until": None,
    "before_id": None,
    "prefix": None,
    "limit": 1,
}


@dataclass(frozen=True, slots=True)
class ToEncrypt:
    """``encryption=`` for ``safepoint encrypt``: open a plaintext store, or one an interrupted
    encrypt left converting, to convert it under ``keyring`` (``store.keys.encrypt_store``)."""

    keyring: Any


def keyring_option(options: dict[str, Any]) -> Any:
    """The ``encryption=`` option (a ``Keyring``, ``ToEncrypt`` or None), taken out of ``options``."""
    keyring = options.pop("encryption", None)
    if keyring is None:
        return None
    from safepoint.crypto.keyring import Keyring  # noqa: PLC0415  (the core install has no cryptography)

    if not isinstance(keyring.keyring if isinstance(keyring, ToEncrypt) else keyring, Keyring):
        raise InvalidArgument(f"encryption must be a safepoint.Keyring, not {type(keyring).__name__}")
    from safepoint.crypto.sealing import require_cryptography  # noqa: PLC0415

    require_cryptography()
    return keyring


def open_encryption(option: Any, *, writable: bool, now: int) -> Op[Sealer | None]:
    """What ``open_store`` does for its ``encryption=`` option (``keyring_option``): the store's
    ``Sealer``, or None for a plain store; ``EncryptedStore`` for a keyless open of one with an id."""
    if option is None:
        names = {row.name for row in (yield Query("store_meta"))}
        _refuse_erasing(names)
        if STORE_ID in names:
            raise EncryptedStore("it")
        return None
    if isinstance(option, ToEncrypt):
        if not writable:
            return None  # a look before the conversion (the CLI's open_existing): nothing sealed or written
        return (yield from open_sealer(option.keyring, writable=True, now=now, converting=True))
    return (yield from open_sealer(option, writable=writable, now=now))


def open_sealer(keyring: Any, *, writable: bool, now: int, converting: bool = False) -> Op[Sealer]:
    """The store's ``Sealer`` under ``keyring``: its id and data keys, made when missing (if ``writable``)."""
    from safepoint.crypto.sealing import DataKey  # noqa: PLC0415
    from safepoint.crypto.wrapping import wrap  # noqa: PLC0415

    meta = {row.name: row.value for row in (yield Query("store_meta"))}
    _refuse_erasing(meta)
    store_id = meta.get(STORE_ID)
    if converting and store_id is not None and meta.get(STATE) != "converting":
        raise InvalidArgument("the store is encrypted already: safepoint rekey moves it to a new key")
    rows = yield Query("data_keys")
    wrapped = {row.key_id: (row.kek_id, bytes(row.wrapped)) for row in rows}
    new = store_id is None
    if store_id is None:
        if not writable:
            raise NotEncrypted("the store is not encrypted: convert it with safepoint encrypt")
        if not converting and (yield Query("list_runs", _ANY_RUN)):
            # Its runs are plain text, which an encrypted store refuses to read.
            raise NotEncrypted("the store holds runs in plain text: convert it with safepoint encrypt")
        yield Query("set_store_meta", {"name": STORE_ID, "value": "st-" + secrets.token_hex(12)})
        meta = {row.name: row.value for row in (yield Query("store_meta"))}
        store_id = meta[STORE_ID]
    for key_id, (kek_id, sealed) in wrapped.items():
        # Each data key under a keyring key already in memory is unwrapped once now (microseconds):
        # a key given with the wrong bytes is InvalidKey at open, before anything is written. A key
        # callable's keys are still fetched only when a value needs them.
        if keyring.holds(kek_id):
            unwrap_for_store(keyring, kek_id, sealed, store_id, key_id)
    checked = yield from _check_index_key(keyring, store_id, meta, wrapped, writable=writable, new=new)
    if converting and meta.get(STATE) != "converting":
        yield Query("replace_store_meta", {"name": STATE, "value": "converting"})
    converting = converting or meta.get(STATE) == "converting"  # plaintext rows may remain: read them
    under_writing = [row.key_id for row in rows if row.kek_id == keyring.writing_id]
    if under_writing:
        writing_id = under_writing[-1]
    elif writable:
        data_key = DataKey.new("dk-" + secrets.token_hex(8))
        kek_id, sealed = wrap(keyring, data_key, store_id)
        yield Query(
            "insert_data_key", {"key_id": data_key.key_id, "kek_id": kek_id, "wrapped": sealed, "now": now}
        )
        wrapped[data_key.key_id] = (kek_id, sealed)
        writing_id = data_key.key_id
    elif rows:
        writing_id = rows[-1].key_id
    else:
        raise NotEncrypted("the store has no data keys yet: open it read-write with its keyring once")
    return Sealer(keyring, store_id, wrapped, writing_id, converting=converting, keys_checked=checked)


def _refuse_erasing(names: Collection[str]) -> None:
    """``StoreNotFound`` for a tenant ``safepoint tenant erase`` is erasing (store/erasing.py): its
    data keys may be gone already, and an open would make it a new one and write beside what the
    erase deletes. Nothing was read or written; the erase, run again, finishes."""
    if ERASING in names:
        raise StoreNotFound("this tenant", "it is being erased (safepoint tenant erase): run the erase again")


def index_check(index_key: bytes, store_id: str) -> str:
    """The check value of ``index_key`` for the store ``store_id``: a keyed digest, hiding the key."""
    return keyed_digest(index_key, INDEX_CHECK, store_id.encode("utf-8", "surrogatepass")).hex()


def _check_index_key(
    keyring: Any,
    store_id: str,
    meta: dict[str, str],
    wrapped: dict[str, tuple[str, bytes]],
    *,
    writable: bool,
    new: bool,
) -> Op[bool]:
    """``InvalidKey`` unless the keyring's index key is the store's; its check value written when
    it is missing and the key is known good (``writable`` only): at once for a store given its id
    by this open (no keyed digest can exist yet), else once a head's keyed digest verified it.
    True when the key was verified (by the check value or a head), False when nothing could tell."""
    expected = index_check(keyring.index_key, store_id)
    stored = meta.get(INDEX_CHECK_NAME)
    if stored is None:
        verdict = True if new else (yield from _verify_on_heads(keyring, store_id, wrapped))
        if verdict is False:
            raise _wrong_index_key("it does not give the keyed digests this store's checkpoints hold")
        if verdict is None:
            # Nothing to tell it by yet (a store made before check values): the next open looks again.
            return False
        if not writable:
            return True
        yield Query("set_store_meta", {"name": INDEX_CHECK_NAME, "value": expected})
        stored = {row.name: row.value for row in (yield Query("store_meta"))}[INDEX_CHECK_NAME]
    if not hmac.compare_digest(stored, expected):
        raise _wrong_index_key("its check value is not the one the store holds")
    return True


def _verify_on_heads(keyring: Any, store_id: str, wrapped: dict[str, tuple[str, bytes]]) -> Op[bool | None]:
    """Whether the index key gives the keyed digest of the head of one of the store's first runs:
    True when one does (or the store has no run: no keyed digest to disagree with), False when a
    head opened and none did, None when no head could tell (plaintext, damaged, under a missing key)."""
    runs = yield Query("runs_after", {"after_ref": 0, "limit": _HEADS_TRIED})
    if not runs:
        return True
    verdict = None
    for run in runs:
        found = yield Query("checkpoint_latest", {"run_id": run.run_id})
        header = found[0].header if found else b""
        if not isinstance(header, bytes | memoryview) or not is_sealed(bytes(header)):
            continue  # deleted since, or still plaintext (a store being converted)
        try:
            key_id, nonce, body = parts(bytes(header))
            if key_id not in wrapped:
                continue
            data_key = unwrap_for_store(keyring, *wrapped[key_id], store_id, key_id)
            place = Place(store_id, run.run_id, found[0].step, "header")
            plain = data_key.open_parts(nonce, body, place)
        except (SealBroken, MissingKey):
            continue  # a damaged head, or one under a key this keyring lacks: it tells nothing
        keyed = keyed_digest(keyring.index_key, CHECKPOINT_DIGEST, codec.digest(plain))
        if hmac.compare_digest(keyed, bytes(found[0].digest or b"")):
            return True
        verdict = False
    return verdict


def _wrong_index_key(why: str) -> InvalidKey:
    return InvalidKey(
        f"the keyring's index key (the entry {INDEX_ID!r}) is not this store's: {why}. Give the keyring"
        " the store was made with; nothing was written"
    )
