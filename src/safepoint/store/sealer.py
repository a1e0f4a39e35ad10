"""An encrypted store's values as stored: sealed for their place, in the column's form.

``Sealer`` holds what an encrypted store needs to write and read its rows:
the store's id, its data keys (unwrapped from ``safepoint_data_keys`` when
first needed: ``MissingKey`` names a keyring key only when a value under it
is read, ``InvalidKey`` one that does not open its data key), the writing
data key and the index key. ``sealed_ops.py`` applies it to every operation.

Each kind of stored value has its form:

* bytes columns (a checkpoint's header, its messages, their chain values):
  the sealed bytes (``crypto.sealing``), bound to run, step and column;
* text and JSON columns (the run's counters, its last error): ``sp1:`` and
  the sealed bytes in base64 (a JSON string in a JSON column), bound to the
  run and the column;
* labels: a JSON object of blind-index tokens (``token of name`` ->
  ``token of name and value``, keyed by the index key) for equality
  filters, with the sealed labels under the key ``""``; sealed with a
  derived nonce, so equal labels are equal bytes and a save that keeps its
  labels leaves the run row alone;
* checkpoint digests: keyed (HMAC of the plain digest under the index key),
  so a digest of a guessable header reveals nothing; operations keep
  working with plain digests (``keyed``/``plain``);
* blobs: named by a keyed digest of their content (so equal content is
  stored once), sealed with a derived nonce, bound to that name.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any

from safepoint import codec
from safepoint.blobs.base import decode_stored
from safepoint.crypto.keyed import (
    CHECKPOINT_DIGEST,
    keyed_content_digest,
    keyed_digest,
    keyed_hasher,
    label_index,
)
from safepoint.crypto.keyring import Keyring
from safepoint.crypto.sealing import (
    NONCE_BYTES,
    TAG_BYTES,
    DataKey,
    Place,
    SealBroken,
    associated_texts,
    is_sealed,
    parts,
    step_bytes,
    tag_error,
)
from safepoint.crypto.wrapping import unwrap_for_store
from safepoint.errors import BlobCorrupt, CorruptCheckpoint, StoreError
from safepoint.forksafe import fork_safe_lock

from .verified import MAX_BYTES, RowMemo

RUN_WIDE = -1  # the step of a value that belongs to the run, not to one checkpoint
TEXT_PREFIX = "sp1:"
LABELS_KEY = ""  # where a labels object holds the sealed labels (no token is empty)
OPENED_BYTES = 2 * MAX_BYTES  # sealed and plain bytes of the rows a load opened (``open_rows``)
_DIGEST_HINTS = 65_536  # keyed -> plain digests remembered (a hint; a miss costs a re-plan)
PLAIN_TEXT = "it is stored in plain text, but the store is encrypted"


class UnknownDataKey(StoreError):
    """A value is sealed under a data key this store has not read (another process made it since):
    ``sealed_ops`` reads the data keys again and goes on; elsewhere (a blob fetched after the load's
    transaction) it is the error, and opening the store again reads the new key."""

    def __init__(self, key_id: str) -> None:
        self.key_id = key_id
        super().__init__(
            f"a value is sealed under data key {key_id!r}, which this store has not read: open it again"
        )


class Sealer:
    """Seal and open an encrypted store's values; thread-safe (one per store)."""

    def __init__(
        self,
        keyring: Keyring,
        store_id: str,
        wrapped: dict[str, tuple[str, bytes]],
        writing_id: str,
        *,
        converting: bool = False,
        keys_checked: bool = False,
    ) -> None:
        self.keyring = keyring
        self.store_id = store_id
        self.converting = converting  # plaintext met is read as it is (``safepoint encrypt``)
        # Whether the open verified the keys (the index key's check value): until then a failed
        # digest may be the keyring's fault, not the row's, and a worker does not quarantine on it.
        self.keys_checked = keys_checked
        self._wrapped = dict(wrapped)  # data key id -> (keyring key id, wrapped bytes)
        self._keys: dict[str, DataKey] = {}
        self._lock = fork_safe_lock(self)  # a fork while another thread holds it must not hang the child
        self._index = keyring.index_key
        self._checkpoint_keyed = keyed_hasher(self._index, CHECKPOINT_DIGEST)
        self._plain: dict[bytes, bytes] = {}  # keyed digest -> plain, and the other way
        self._keyed: dict[bytes, bytes] = {}
        self._labels: dict[tuple[str, str, str], str] = {}
        self._texts: dict[tuple[str, str], bytes] = {}  # (run, column) -> associated data's texts
        self.writing = self.data_key(writing_id)
        # Plaintexts of carrier rows opened, by (run, column) and step: (sealed bytes as read, plaintext).
        # Kept from a run's second load on: a first load keeps neither, so each row's sealed
        # bytes go as soon as it is opened (its peak memory: the plaintext, not both).
        self._opened_rows: RowMemo[int, tuple[bytes, bytes]] = RowMemo(
            OPENED_BYTES, lambda entry: len(entry[0]) + len(entry[1]), second_sight=True
        )
        self._decrypt, self._tag_error = self.writing.raw_decrypt(), tag_error()

    # -- data keys ---------------------------------------------------------

    def data_key(self, key_id: str) -> DataKey:
        """The data key ``key_id``, unwrapped once; ``MissingKey`` naming the keyring key it needs."""
        found = self._keys.get(key_id)
        if found is not None:
            return found
        entry = self._wrapped.get(key_id)
        if entry is None:
            raise UnknownDataKey(key_id)
        key = unwrap_for_store(self.keyring, *entry, self.store_id, key_id)
        with self._lock:
            self._keys[key_id] = key
        return key

    def learn(self, rows: Iterable[Any]) -> None:
        """The data keys as ``data_keys`` returned them (another process may have added one)."""
        with self._lock:
            for row in rows:
                self._wrapped[row.key_id] = (row.kek_id, bytes(row.wrapped))

    # -- bytes columns -----------------------------------------------------

    def seal(self, data: bytes, run_id: str, step: int, column: str) -> bytes:
        return self.writing.seal(data, Place(self.store_id, run_id, step, column))

    def seal_columns(self, columns: list[tuple[str, bytes]], run_id: str, step: int) -> list[bytes]:
        """``seal`` of one row's bytes columns, (column, plaintext) each: the same sealed form and
        associated data, made from this store's per-run texts with the step packed once, and every
        value under a random nonce of its own (``DataKey.seal_each``)."""
        packed, known, values = step_bytes(step), self._texts, []
        for column, data in columns:
            texts = known.get((run_id, column))
            values.append((data, (texts or self._associated(run_id, column)) + packed))
        return self.writing.seal_each(values)

    def open(self, stored: Any, run_id: str, step: int, column: str) -> bytes:
        """The plaintext of a sealed column value; ``CorruptCheckpoint`` naming run and step.

        One value (a load's header): opened straight away, with no memo (a header is
        small; the lookup and the lock would cost more than AES-GCM does)."""
        if type(stored) is bytes:
            prefix = self.writing.prefix
            start = len(prefix)
            if stored.startswith(prefix) and len(stored) >= start + NONCE_BYTES + TAG_BYTES:
                nonce_end = start + NONCE_BYTES
                try:
                    return self._decrypt(
                        stored[start:nonce_end],
                        memoryview(stored)[nonce_end:],
                        self._associated(run_id, column) + step_bytes(step),
                    )
                except self._tag_error:
                    raise CorruptCheckpoint(
                        run_id, _shown(step), f"its {column} does not open: it does not decrypt for its place"
                    ) from None
        return self.open_steps([(stored, step)], run_id, column)[0]

    def _associated(self, run_id: str, column: str) -> bytes:
        """``associated_texts`` of this store, ``run_id`` and ``column``, made once per pair:
        the associated data is a function of those strings alone."""
        found = self._texts.get((run_id, column))
        if found is None:
            found = associated_texts(self.store_id, run_id, column)
            if len(self._texts) >= _DIGEST_HINTS:
                self._texts.clear()
            self._texts[(run_id, column)] = found
        return found

    def open_steps(self, values: list[tuple[Any, int]], run_id: str, column: str) -> list[bytes]:
        """``open`` of many (stored, step) values of one run's ``column``."""
        rows = [[stored, step] for stored, step in values]
        self.open_rows(rows, 0, 1, run_id=run_id, column=column, done=[0])
        return [row[0] for row in rows]

    def open_rows(
        self, rows: list[list[Any]], index: int, step_at: int, *, run_id: str, column: str, done: list[int]
    ) -> None:
        """``open`` of each row's ``column`` value (at ``index``; its step at ``step_at``), in place:
        a row's sealed value gives way to its plaintext as soon as that is made, so
        the memory it held serves the next one (a load's carrier rows: one
        message log's bytes at a time, not two). None stays None.

        ``done[0]``: how many rows are opened already; it moves with each, so a
        caller that meets ``UnknownDataKey``, reads the data keys and calls again
        goes on from the row that stopped it. Most values take the fast way: sealed
        under the writing data key, and the associated data's run and column part
        made once. Anything else takes the checked way (``_opened``), which names
        what is wrong.

        A value this sealer opened before for the same run, step and column is not
        opened again when its sealed bytes as read are the very same (one C-level
        comparison): equal bytes under the same key and associated data open to the
        same plaintext, so the memo changes what is decrypted, not what is accepted;
        other bytes (a row replaced, replayed, swapped) are decrypted and checked.
        """
        texts, pack = self._associated(run_id, column), step_bytes
        prefix, decrypt = self.writing.prefix, self._decrypt
        start = len(prefix)
        nonce_end = start + NONCE_BYTES
        shortest = nonce_end + TAG_BYTES
        step = RUN_WIDE
        known = self._opened_rows.group((run_id, column))
        # A first load of the run (``second_sight``) keeps nothing: noting here what it opened
        # would hold every row's sealed bytes beside its plaintext until the last one is opened.
        keeps = self._opened_rows.keeps((run_id, column))
        learnt: dict[int, tuple[bytes, bytes]] = {}
        at = done[0]
        try:
            # One row a turn, in as few steps as it takes: a load at step 10 opens ten rows, and
            # this loop was a third of the Python an encrypted load adds to a plain one.
            for row in rows[at:] if at else rows:
                data, step = row[index], row[step_at]
                if type(data) is not bytes and data is not None:
                    if not isinstance(data, bytearray | memoryview):
                        raise CorruptCheckpoint(run_id, _shown(step), f"its {column} is not stored as bytes")
                    data = bytes(data)
                if data is None:
                    pass
                elif known and (seen := known.get(step)) is not None and seen[0] == data:
                    row[index] = seen[1]  # the sealed bytes compared whole
                elif data.startswith(prefix) and len(data) >= shortest:
                    # A view of the ciphertext: no copy of it.
                    plain = decrypt(data[start:nonce_end], memoryview(data)[nonce_end:], texts + pack(step))
                    row[index] = plain
                    if keeps:
                        learnt[step] = (data, plain)
                else:
                    row[index] = self._opened(data, run_id, step, column)
                at += 1
            if learnt or not keeps:  # a first load: the memo notes the run, to keep its next load's rows
                self._opened_rows.learn((run_id, column), learnt)
        except self._tag_error:  # the value at done[0] did not open
            raise CorruptCheckpoint(
                run_id, _shown(step), f"its {column} does not open: it does not decrypt for its place"
            ) from None
        finally:
            done[0] = at  # the rows opened, whatever stopped the loop

    def _opened(self, data: bytes, run_id: str, step: int, column: str) -> bytes:
        if not is_sealed(data):
            if self.converting or not data:
                return data  # an empty value (a pruned row's header) holds nothing
            raise CorruptCheckpoint(run_id, _shown(step), f"its {column} {PLAIN_TEXT}")
        try:
            key_id, nonce, body = parts(data)
            return self.data_key(key_id).open_parts(nonce, body, Place(self.store_id, run_id, step, column))
        except SealBroken as broken:
            raise CorruptCheckpoint(
                run_id, _shown(step), f"its {column} does not open: {broken.detail}"
            ) from None

    # -- text and JSON columns ---------------------------------------------

    def seal_text(self, text: str, run_id: str, column: str) -> str:
        sealed = self.seal(text.encode("utf-8", "surrogatepass"), run_id, RUN_WIDE, column)
        return TEXT_PREFIX + base64.b64encode(sealed).decode("ascii")

    def open_text(self, stored: str, run_id: str, column: str) -> str:
        if not stored.startswith(TEXT_PREFIX):
            if self.converting:
                return stored
            raise CorruptCheckpoint(run_id, None, f"its {column} {PLAIN_TEXT}")
        try:
            sealed = base64.b64decode(stored[len(TEXT_PREFIX) :], validate=True)
        except (binascii.Error, ValueError):
            raise CorruptCheckpoint(run_id, None, f"its {column} is not a sealed value") from None
        return self.open(sealed, run_id, RUN_WIDE, column).decode("utf-8", "surrogatepass")

    def seal_json(self, text: str, run_id: str, column: str) -> str:
        """A JSON column's value sealed: a JSON string (``"sp1:…"``), valid in a jsonb column."""
        return codec.encode(self.seal_text(text, run_id, column)).decode()

    def open_json(self, stored: str, run_id: str, column: str) -> str:
        value = codec.decode(stored)
        if type(value) is not str:
            if self.converting:
                return stored
            raise CorruptCheckpoint(run_id, None, f"its {column} {PLAIN_TEXT}")
        return self.open_text(value, run_id, column)

    # -- labels ------------------------------------------------------------

    def tokens(self, labels: dict[str, str]) -> dict[str, str]:
        """The blind index of ``labels``: a token per name, a token per name and value."""
        return {
            keyed_digest(
                self._index, b"label name", name.encode("utf-8", "surrogatepass")
            ).hex(): label_index(self._index, name, value)
            for name, value in labels.items()
        }

    def seal_labels(self, labels_json: str, run_id: str) -> str:
        # The same labels give the same bytes (a derived nonce): a run's, sealed once per process.
        remembered = (run_id, labels_json, self.writing.key_id)
        found = self._labels.get(remembered)
        if found is None:
            if len(self._labels) >= _DIGEST_HINTS:
                self._labels.clear()
            found = self._labels[remembered] = self._sealed_labels(labels_json, run_id)
        return found

    def _sealed_labels(self, labels_json: str, run_id: str) -> str:
        labels = codec.decode(labels_json)
        place = Place(self.store_id, run_id, RUN_WIDE, "labels")
        sealed = self.writing.seal_same(labels_json.encode("utf-8", "surrogatepass"), place)
        stored = self.tokens(labels)
        stored[LABELS_KEY] = TEXT_PREFIX + base64.b64encode(sealed).decode("ascii")
        return codec.encode(stored).decode()

    def open_labels(self, stored: str, run_id: str) -> str:
        value = codec.decode(stored)
        if type(value) is not dict or LABELS_KEY not in value:
            if self.converting:
                return stored
            raise CorruptCheckpoint(run_id, None, f"its labels {PLAIN_TEXT}")
        sealed = value.pop(LABELS_KEY)
        text = self.open_text(sealed, run_id, "labels") if type(sealed) is str else None
        if text is None or self.tokens(codec.decode(text)) != value:
            raise CorruptCheckpoint(run_id, None, "its labels do not match their blind index")
        return text

    def wanted_labels(self, labels_json: str) -> str:
        """A label filter, as tokens the stored labels objects hold."""
        return codec.encode(self.tokens(codec.decode(labels_json))).decode()

    # -- checkpoint digests ------------------------------------------------

    def keyed(self, plain: bytes) -> bytes:
        keyed = self._keyed.get(plain)  # a load checks its head's digest each time
        if keyed is None:
            keyed = self._checkpoint_keyed(plain)
            if len(self._plain) >= _DIGEST_HINTS:
                self._plain.clear()
                self._keyed.clear()
            self._plain[keyed] = plain
            self._keyed[plain] = keyed
        return keyed

    def plain(self, stored: Any) -> Any:
        """The plain digest a stored (keyed) one stands for, when this store has seen it; else as stored."""
        if stored is None:
            return None
        return self._plain.get(bytes(stored), stored)

    # -- blobs -------------------------------------------------------------

    def blob_digest(self, data: bytes) -> str:
        return keyed_content_digest(self._index, b"blob", data).hex()

    def seal_blob(self, digest: str, data: bytes) -> bytes:
        # The name is a keyed digest of the content (or, for a blob stored before the store was
        # encrypted, its SHA-256): one content per name, so the nonce comes from the name alone.
        return self.writing.seal_named(data, self._blob_place(digest))

    def open_blob(self, digest: str, stored: bytes) -> bytes:
        """A blob's content, verified by opening it for its name: a keyed digest, or the SHA-256 a
        blob stored before the store was encrypted keeps (its references name it so)."""
        if not is_sealed(stored):
            if self.converting:
                return decode_stored(digest, stored)
            raise BlobCorrupt(digest, PLAIN_TEXT)
        try:
            key_id, nonce, body = parts(memoryview(stored))  # views: no copy of a large blob
            # Opening verifies it: only a holder of the data key could seal bytes for this name, and
            # the store seals a blob only under the keyed digest of its content (no second hash).
            return self.data_key(key_id).open_parts(nonce, body, self._blob_place(digest))
        except SealBroken as broken:
            raise BlobCorrupt(digest, f"it does not open: {broken.detail}") from None

    def _blob_place(self, digest: str) -> Place:
        return Place(self.store_id, "", RUN_WIDE, "blob " + digest)


def _shown(step: int) -> int | None:
    return None if step == RUN_WIDE else step
