"""Opening a store with ``encryption=``: its id and data keys, read (or made on first use) in one go.

The first read-write open with a keyring gives the store its id
(``safepoint_meta``) and a data key wrapped under the keyring's writing
key (``safepoint_data_keys``). Every later open reads them; it adds a data
key when none is wrapped under the writing key yet (a key was added to the
keyring: new values are sealed under the new data key, old ones still open
under theirs). A read-only open writes nothing: it seals nothing either, so
it takes the newest data key it finds.
"""

from __future__ import annotations

import secrets
from typing import Any

from safepoint.errors import InvalidArgument, NotEncrypted

from .query import Op, Query
from .sealer import Sealer

STORE_ID = "store_id"
STATE = "encryption"  # "converting" while safepoint encrypt runs, then "encrypted"
_ANY_RUN = {
    "statuses": None,
    "labels": None,
    "updated_since": None,
    "before_id": None,
    "prefix": None,
    "limit": 1,
}


def keyring_option(options: dict[str, Any]) -> Any:
    """The ``encryption=`` option (a ``safepoint.Keyring`` or None), taken out of ``options``."""
    keyring = options.pop("encryption", None)
    if keyring is None:
        return None
    from safepoint.crypto.keyring import Keyring  # noqa: PLC0415  (the core install has no cryptography)

    if not isinstance(keyring, Keyring):
        raise InvalidArgument(f"encryption must be a safepoint.Keyring, not {type(keyring).__name__}")
    from safepoint.crypto.sealing import require_cryptography  # noqa: PLC0415

    require_cryptography()
    return keyring


def open_sealer(keyring: Any, *, writable: bool, now: int, converting: bool = False) -> Op[Sealer]:
    """The store's ``Sealer`` under ``keyring``: its id and data keys, made when missing (if ``writable``)."""
    from safepoint.crypto.sealing import DataKey, wrap  # noqa: PLC0415

    meta = {row.name: row.value for row in (yield Query("store_meta"))}
    store_id = meta.get(STORE_ID)
    if converting and store_id is not None and meta.get(STATE) != "converting":
        raise InvalidArgument("the store is encrypted already: safepoint rekey moves it to a new key")
    if store_id is None:
        if not writable:
            raise NotEncrypted("the store is not encrypted: convert it with safepoint encrypt")
        if not converting and (yield Query("list_runs", _ANY_RUN)):
            # Its runs are plain text, which an encrypted store refuses to read.
            raise NotEncrypted("the store holds runs in plain text: convert it with safepoint encrypt")
        yield Query("set_store_meta", {"name": STORE_ID, "value": "st-" + secrets.token_hex(12)})
        meta = {row.name: row.value for row in (yield Query("store_meta"))}
        store_id = meta[STORE_ID]
    if converting and meta.get(STATE) != "converting":
        yield Query("replace_store_meta", {"name": STATE, "value": "converting"})
    converting = converting or meta.get(STATE) == "converting"  # plaintext rows may remain: read them
    rows = yield Query("data_keys")
    wrapped = {row.key_id: (row.kek_id, bytes(row.wrapped)) for row in rows}
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
    return Sealer(keyring, store_id, wrapped, writing_id, converting=converting)
