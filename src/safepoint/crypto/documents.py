"""A whole file sealed under a keyring: what ``safepoint export --encrypt`` writes.

A sealed document is JSON that names what it holds and nothing of it::

    {"safepoint_sealed": 1, "holds": "fixture", "kek_id": "2026-01",
     "data_key": "<base64>", "sealed": "<base64>"}

The content is sealed under a fresh data key (AES-256-GCM, ``sealing``),
which is wrapped under the keyring's writing key, exactly as a store's data
keys are; the associated data names what the document holds, so a sealed
fixture opens only as a fixture. It is bound to no store: it opens wherever
the keyring that sealed it (or a later one holding that key id) is given,
so a run exported from production can be imported on a laptop that has the
key, and nowhere else.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from typing import Any

from safepoint import codec
from safepoint.errors import InvalidArgument, MissingKey

from .keyring import Keyring, valid_key_id
from .sealing import DataKey, Place, SealBroken
from .wrapping import unwrap, wrap

FORMAT = 1
_MARK = "safepoint_sealed"


def is_sealed_document(document: Any) -> bool:
    """Whether a parsed JSON document is a sealed document (of any format)."""
    return isinstance(document, dict) and _MARK in document


def seal_document(content: bytes, keyring: Keyring, holds: str) -> str:
    """``content`` sealed under ``keyring``'s writing key, as a sealed document's JSON text."""
    data_key = DataKey.new("doc-" + secrets.token_hex(8))
    kek_id, wrapped = wrap(keyring, data_key, _owner(holds, data_key.key_id))
    document = {
        _MARK: FORMAT,
        "holds": holds,
        "kek_id": kek_id,
        "data_key_id": data_key.key_id,
        "data_key": base64.b64encode(wrapped).decode("ascii"),
        "sealed": base64.b64encode(data_key.seal(content, _place(holds))).decode("ascii"),
    }
    return codec.encode(document).decode() + "\n"


def open_document(document: Any, keyring: Keyring | None, holds: str, where: str) -> bytes:
    """The content of a parsed sealed document.

    ``MissingKey`` when no keyring is given or it lacks the key id the
    document names; ``InvalidArgument`` naming ``where`` when the document
    is not a sealed ``holds``, or when it does not open (altered, or sealed
    for something else).
    """
    if not is_sealed_document(document) or document[_MARK] != FORMAT:
        raise InvalidArgument(f"{where}: not a sealed document of a format this version reads ({FORMAT})")
    if document.get("holds") != holds:
        raise InvalidArgument(f"{where}: the sealed document does not hold a {holds}")
    kek_id, key_id = document.get("kek_id"), document.get("data_key_id")
    if not valid_key_id(kek_id) or not valid_key_id(key_id):
        raise InvalidArgument(f"{where}: the sealed document's key ids are not key ids")
    if keyring is None:
        raise MissingKey(
            kek_id,
            f"{where} is sealed under key {kek_id!r}: give the keyring that holds it "
            "(encryption=Keyring...; the CLI: --key-file or SAFEPOINT_KEYS)",
        )
    try:
        wrapped = base64.b64decode(document.get("data_key", ""), validate=True)
        sealed = base64.b64decode(document.get("sealed", ""), validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise InvalidArgument(f"{where}: the sealed document's values are not base64") from None
    try:
        data_key = unwrap(keyring, kek_id, wrapped, _owner(holds, key_id), key_id)
        return data_key.unseal(sealed, _place(holds))
    except SealBroken as broken:
        raise InvalidArgument(f"{where}: the sealed {holds} does not open: {broken.detail}") from None


def _owner(holds: str, key_id: str) -> str:
    # Stands where a store's id stands in a wrapped key's associated data: never a store id ("st-...").
    return f"sealed {holds} {key_id}"


def _place(holds: str) -> Place:
    return Place("sealed document", "", 0, holds)
