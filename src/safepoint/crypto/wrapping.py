"""Data keys wrapped under the keyring's key-encryption keys, and unwrapped again.

A data key (DEK) is 32 random bytes, wrapped (sealed) under a key-encryption
key of the keyring with associated data naming the store and the DEK's id;
the wrapped DEKs live in the store. Rotating a key-encryption key rewraps
DEKs, never rows. ``unwrap`` says ``SealBroken`` when the bytes do not open;
``unwrap_for_store`` says what that means to a store's user: the keyring's
key of that id is not the one the data key was wrapped under (``InvalidKey``).
"""

from __future__ import annotations

import os

from safepoint.errors import InvalidKey
from safepoint.visible import visible

from .keyring import KEY_BYTES, Keyring
from .sealing import NONCE_BYTES, TAG_BYTES, DataKey, Place, SealBroken, cipher_class, tag_error

_WRAP_LABEL = b"safepoint data key\x00"


def wrap(keyring: Keyring, data_key: DataKey, store_id: str) -> tuple[str, bytes]:
    """``data_key`` sealed under the keyring's writing key: (that key's id, the wrapped bytes)."""
    kek_id = keyring.writing_id
    nonce = os.urandom(NONCE_BYTES)
    cipher = cipher_class()(keyring.key(kek_id))
    wrapped = cipher.encrypt(nonce, data_key.key, _wrap_data(store_id, data_key.key_id))
    return kek_id, nonce + wrapped


def unwrap(keyring: Keyring, kek_id: str, wrapped: bytes, store_id: str, data_key_id: str) -> DataKey:
    """The data key ``data_key_id`` from its wrapped bytes; ``MissingKey`` if the keyring lacks ``kek_id``."""
    kek = keyring.key(kek_id)
    if len(wrapped) != NONCE_BYTES + KEY_BYTES + TAG_BYTES:
        raise SealBroken("a wrapped data key is not the size one is")
    try:
        key = cipher_class()(kek).decrypt(
            wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:], _wrap_data(store_id, data_key_id)
        )
    except tag_error():
        raise SealBroken(f"data key {data_key_id!r} does not unwrap under key {kek_id!r}") from None
    return DataKey(data_key_id, key)


def _wrap_data(store_id: str, data_key_id: str) -> bytes:
    return _WRAP_LABEL + Place(store_id, data_key_id, 0, "data key").associated_data()


def unwrap_for_store(keyring: Keyring, kek_id: str, wrapped: bytes, store_id: str, key_id: str) -> DataKey:
    """``unwrap``; a keyring key that does not open the data key is ``InvalidKey`` naming both ids."""
    try:
        return unwrap(keyring, kek_id, wrapped, store_id, key_id)
    except SealBroken:
        kek, data_key = visible(kek_id, max_len=64), visible(key_id, max_len=64)
        raise InvalidKey(
            f"key {kek} of the keyring does not open data key {data_key} of this store: it is not the"
            " key that was given that id (or the data key's row was copied from another store)"
        ) from None
