"""AES-256-GCM envelopes: values sealed under data keys (data keys wrapped: ``wrapping.py``).

A sealed value is ``MAGIC``, the id of its data key (DEK), a random 96-bit
nonce, and the ciphertext with its 16-byte tag. ``MAGIC`` starts with a NUL,
which no JSON text and no UTF-8 text a store writes begins with, so a
plaintext row is told from a sealed one (an encrypted store refuses
plaintext it meets, fail-closed). The associated data names the value's
``Place`` (the store's id, the run and step of the row that carries it, the
column), so a sealed value copied onto another run, step, column or store
does not open: ``unseal`` raises ``SealBroken``, which the store reports as
``CorruptCheckpoint`` naming run and step (``BlobCorrupt`` for a blob).

A DEK is 32 random bytes, wrapped under a key-encryption key of the keyring
(``wrapping.py``). Random nonces are safe for 2**32 seals under one DEK (NIST SP
800-38D); the store starts a new DEK long before that.
"""

from __future__ import annotations

import functools
import hmac
import os
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from safepoint.errors import MissingExtra

from .keyring import KEY_BYTES, valid_key_id

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MAGIC = b"\x00sp1"
NONCE_BYTES = 12
TAG_BYTES = 16
_NONCE_LABEL = b"safepoint derived nonce\x00"


@functools.cache
def _cryptography() -> tuple[type[AESGCM], type[Exception]]:
    """AES-GCM and its tag error, imported on first use.

    The store imports this module on every install; only an encrypted store
    needs ``cryptography``, which the core install does not have.
    """
    try:
        from cryptography.exceptions import InvalidTag  # noqa: PLC0415
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: PLC0415
    except ImportError as exc:
        raise MissingExtra("encryption at rest", "encryption", exc.name or "cryptography") from exc
    return AESGCM, InvalidTag


def require_cryptography() -> None:
    """``MissingExtra`` unless ``cryptography`` imports: checked before a store opens (nothing written)."""
    _cryptography()


def cipher_class() -> type[AESGCM]:
    """AES-GCM's class from ``cryptography`` (``MissingExtra`` without it)."""
    return _cryptography()[0]


def tag_error() -> type[Exception]:
    """What AES-GCM raises for a value that does not open (``raw_decrypt``'s function too).

    Named in an except clause, it is called only when something was raised."""
    return _cryptography()[1]


class SealBroken(Exception):  # internal: the store raises CorruptCheckpoint or BlobCorrupt
    """A sealed value does not open: altered, truncated, from another place, or under another key."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


@dataclass(frozen=True, slots=True)
class Place:
    """Where a sealed value belongs: its associated data."""

    store_id: str
    run_id: str
    step: int
    column: str

    def associated_data(self) -> bytes:
        return associated_data(self.store_id, self.run_id, self.step, self.column)


_STEP = struct.Struct(">q")
Buffer = bytes | memoryview  # what opening takes: stored bytes, or views into them (no copy)


class _Nonces:
    """Random 96-bit nonces, drawn from the OS in bulk: a save seals a few values, and one
    ``getrandom`` per value costs more than the seal. Emptied in a forked child, so two
    processes never hand out the same buffered bytes: by the at-fork hook (``os.fork``), and
    by the process id the batch was drawn in, checked on every nonce, for a child forked where
    Python's hooks do not run (libc ``fork()`` called from native code)."""

    _BATCH = NONCE_BYTES * 512

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffer = b""
        self._at = 0
        self._pid = os.getpid()
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._lock = threading.Lock()  # a lock held at fork time stays held in the child
        self._buffer, self._at = b"", 0

    def next(self) -> bytes:
        with self._lock:
            if self._at + NONCE_BYTES > len(self._buffer) or os.getpid() != self._pid:
                self._buffer, self._at, self._pid = os.urandom(self._BATCH), 0, os.getpid()
            start = self._at
            self._at = start + NONCE_BYTES
            return self._buffer[start : self._at]

    def take(self, count: int) -> bytes:
        """``count`` nonces at once (a save's columns), end to end: one lock and one process-id
        check for all; the caller cuts them apart."""
        size = NONCE_BYTES * count
        with self._lock:
            if self._at + size > len(self._buffer) or os.getpid() != self._pid:
                self._buffer, self._at, self._pid = os.urandom(max(self._BATCH, size)), 0, os.getpid()
            start = self._at
            self._at = start + size
            return self._buffer[start : self._at]


_NONCES = _Nonces()


def associated_data(store_id: str, run_id: str, step: int, column: str) -> bytes:
    # Each text length-prefixed, the step as 8 bytes: no two places give the same bytes.
    return associated_texts(store_id, run_id, column) + step_bytes(step)


step_bytes = _STEP.pack  # the associated data's last part: ``associated_texts(...) + step_bytes(step)``


@functools.lru_cache(maxsize=4096)  # a run's saves and loads: the same few runs and columns, step after step
def associated_texts(store_id: str, run_id: str, column: str) -> bytes:
    out = bytearray()
    for text in (store_id, run_id, column):
        encoded = text.encode("utf-8", "surrogatepass")
        out += struct.pack(">I", len(encoded)) + encoded
    return bytes(out)


@dataclass(frozen=True, slots=True)
class DataKey:
    """A data key: its id (stored beside every value it seals) and its 32 bytes (never shown)."""

    key_id: str
    key: bytes = field(repr=False)
    _cipher: AESGCM = field(init=False, repr=False, compare=False)
    _nonce_key: bytes = field(init=False, repr=False, compare=False)
    # What every value this key seals begins with: MAGIC, the id's length, the id.
    prefix: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not valid_key_id(self.key_id) or len(self.key) != KEY_BYTES:
            raise ValueError("a data key is a valid id and 32 bytes")
        ident = self.key_id.encode("ascii")
        object.__setattr__(self, "prefix", MAGIC + bytes([len(ident)]) + ident)
        object.__setattr__(self, "_cipher", _cryptography()[0](self.key))
        # Its own key for derived nonces: the AES key is never used for anything else.
        object.__setattr__(self, "_nonce_key", hmac.digest(self.key, _NONCE_LABEL, "sha256"))

    @classmethod
    def new(cls, key_id: str) -> DataKey:
        return cls(key_id, os.urandom(KEY_BYTES))

    def seal(self, plaintext: bytes, place: Place) -> bytes:
        """``plaintext`` sealed for ``place``, under a random nonce."""
        return self._sealed(_NONCES.next(), plaintext, place)

    def seal_same(self, plaintext: bytes, place: Place) -> bytes:
        """``plaintext`` sealed for ``place`` under a nonce derived from both (a synthetic IV).

        The same value for the same place gives the same bytes under this
        key, and nothing else does (the nonce is an HMAC of place and value):
        for values the database compares (a run's labels) or stores once by
        name (a blob). It shows only that two such values are equal.
        """
        aad = place.associated_data()
        mac = hmac.digest(self._nonce_key, struct.pack(">I", len(aad)) + aad + plaintext, "sha256")
        return self._sealed(mac[:NONCE_BYTES], plaintext, place)

    def seal_named(self, plaintext: bytes, place: Place) -> bytes:
        """``seal_same`` for a place whose name is a collision-resistant digest of ``plaintext`` (a blob's).

        The place already tells one value from another, so the nonce is derived
        from the place alone: one pass over a large value fewer. Never for a
        place that could hold two different values.
        """
        aad = place.associated_data()
        mac = hmac.digest(self._nonce_key, struct.pack(">I", len(aad)) + aad, "sha256")
        return self._sealed(mac[:NONCE_BYTES], plaintext, place)

    def _sealed(self, nonce: bytes, plaintext: bytes, place: Place) -> bytes:
        return self.prefix + nonce + self._cipher.encrypt(nonce, plaintext, place.associated_data())

    def seal_each(self, values: list[tuple[bytes, bytes]]) -> list[bytes]:
        """``seal`` of several values, each given with its place's associated data already made
        (``associated_texts(...) + step_bytes(step)``, the bytes ``Place.associated_data`` gives):
        each under a random nonce of its own, the nonces drawn together. For a save's columns,
        where a ``Place`` per value and a draw per nonce cost more than the seals do."""
        encrypt, prefix, join = self._cipher.encrypt, self.prefix, b"".join
        nonces = _NONCES.take(len(values))
        out, at = [], 0
        for plaintext, associated in values:
            nonce = nonces[at : at + NONCE_BYTES]
            at += NONCE_BYTES
            out.append(join((prefix, nonce, encrypt(nonce, plaintext, associated))))
        return out

    def raw_decrypt(self) -> Callable[[Buffer, Buffer, bytes], bytes]:
        """The bare AES-GCM open of this key: (nonce, ciphertext and tag, associated data) -> plaintext.

        For a loop that opens many values (``Sealer.open_steps``) and catches
        ``tag_error()`` itself; everything else uses ``open_raw``."""
        return self._cipher.decrypt

    def unseal(self, sealed: bytes, place: Place) -> bytes:
        """The plaintext of a value this key sealed for ``place``; ``SealBroken`` otherwise."""
        key_id, nonce, body = parts(sealed)
        if key_id != self.key_id:
            raise SealBroken("it is sealed under another data key")
        return self.open_parts(nonce, body, place)

    def open_parts(self, nonce: Buffer, body: Buffer, place: Place) -> bytes:
        """``unseal`` of a value already split by ``parts`` (and found to be under this key)."""
        return self.open_raw(nonce, body, place.associated_data())

    def open_raw(self, nonce: Buffer, body: Buffer, associated_data: bytes) -> bytes:
        """``open_parts`` with the place's associated data already made (``associated_data``)."""
        try:
            return self._cipher.decrypt(nonce, body, associated_data)
        except tag_error():
            raise SealBroken("it does not decrypt for its place: altered, or copied from another") from None


def is_sealed(data: Buffer) -> bool:
    """Whether ``data`` is a sealed value (else it is plaintext, which no JSON or text begins like)."""
    return data[: len(MAGIC)] == MAGIC


def key_id_of(sealed: bytes) -> str:
    """The id of the data key that sealed ``sealed``; ``SealBroken`` when it is not a sealed value."""
    return parts(sealed)[0]


def unseal(data_keys: Callable[[str], DataKey], sealed: bytes, place: Place) -> bytes:
    """Open ``sealed`` with the data key its id names (``data_keys`` finds it, or raises ``MissingKey``)."""
    return data_keys(key_id_of(sealed)).unseal(sealed, place)


def parts(sealed: Buffer) -> tuple[str, Buffer, Buffer]:
    """A sealed value split: its data key's id, its nonce, its ciphertext and tag; ``SealBroken``
    when it is not a sealed value. Given a memoryview, the nonce and the rest are views."""
    if not is_sealed(sealed) or len(sealed) < len(MAGIC) + 1:
        raise SealBroken("it is not sealed")
    length = sealed[len(MAGIC)]
    start = len(MAGIC) + 1
    ident = bytes(sealed[start : start + length])
    nonce = sealed[start + length : start + length + NONCE_BYTES]
    body = sealed[start + length + NONCE_BYTES :]
    if len(nonce) != NONCE_BYTES or len(body) < TAG_BYTES:
        raise SealBroken("it is cut short")
    key_id = _KEY_IDS.get(ident)
    if key_id is None:
        try:
            key_id = ident.decode("ascii")
        except UnicodeDecodeError:
            raise SealBroken("its data key id is not one") from None
        if not valid_key_id(key_id):
            raise SealBroken("its data key id is not one")
        if len(_KEY_IDS) < 1024:  # a store has a handful of data keys; junk ids are not kept
            _KEY_IDS[ident] = key_id
    return key_id, nonce, body


_KEY_IDS: dict[bytes, str] = {}  # data key ids met, each checked once
