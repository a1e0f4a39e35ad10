"""Sealing stored values again: a run's rows and call journal entries under the writing data key
(``rekey``), or for the first time (``encrypt``), one run per transaction; and the database blob
table, a page at a time.

These operations see values as stored — they are run on the driver directly,
not through ``sealed_ops`` — and use the store's ``Sealer`` themselves: each
value is opened (plaintext passes when the sealer is converting) and sealed
under the writing data key for the same place. A row already wholly under
the writing key is left alone, so a rerun after a kill does only what is
left. Checkpoint digests do not depend on the data key: ``encrypt`` keys the
plain ones, ``rekey`` keeps them.
"""

from __future__ import annotations

import base64
from collections import Counter
from dataclasses import dataclass
from typing import Any

from safepoint import codec
from safepoint.blobs.base import decode_stored
from safepoint.crypto.sealing import SealBroken, is_sealed, key_id_of
from safepoint.errors import BlobCorrupt, InvalidKey, MissingKey, SafepointError
from safepoint.store.call_values import entry_digest
from safepoint.store.ops.redacting import key_records
from safepoint.store.query import UNSUPPORTED, Op, Query
from safepoint.store.sealer import TEXT_PREFIX, Sealer

_ROW_COLUMNS = ("header", "messages", "chains")


@dataclass(frozen=True, slots=True)
class Resealed:
    """What one run's reseal changed: rows, and whether the run row was."""

    rows: int
    run_row: bool


def reseal_run(run_ref: int, run_id: str, sealer: Sealer) -> Op[Resealed]:
    """Every row of one run, and its run row, under the writing data key; the run stays locked meanwhile."""
    found = yield Query("sealed_run", {"run_ref": run_ref})
    if not found:
        return Resealed(0, False)  # deleted since it was listed
    run = found[0]
    rows = yield Query("sealed_rows", {"run_ref": run_ref})
    writing = sealer.writing.key_id
    keyed_of: dict[bytes, bytes] = {}  # plain digest -> keyed, for the run row's head digest
    changed = 0
    for row in rows:
        values = {column: getattr(row, column) for column in _ROW_COLUMNS}
        digest = bytes(row.digest)
        if all(_under(value, writing) for value in values.values()):
            continue
        params: dict[str, Any] = {"run_ref": run_ref, "step": row.step}
        for column, value in values.items():
            if value is None or not len(value):
                params[column] = value
                continue
            plain = sealer.open(value, run_id, row.step, column)
            params[column] = sealer.seal(plain, run_id, row.step, column)
            if column == "header" and codec.digest(plain) == digest:  # a plaintext row's: keyed now
                keyed_of[digest] = sealer.keyed(digest)
                digest = keyed_of[digest]
        params["digest"] = digest
        yield Query("reseal_row", params)
        changed += 1
    changed += yield from _reseal_calls(run_ref, run_id, sealer)
    yield from key_records(run_ref, run_id, sealer)  # redaction audit records: not rows, not counted
    labels, counters, error, head = run.labels, run.counters, run.last_error, run.head_digest
    if (
        _under_text(labels, writing, labels=True)
        and _under_text(counters, writing)
        and _under_text(error, writing)
    ) and (head is None or bytes(head) not in keyed_of):
        return Resealed(changed, False)
    yield Query(
        "reseal_run",
        {
            "run_ref": run_ref,
            "labels": sealer.seal_labels(sealer.open_labels(labels, run_id), run_id),
            "counters": None
            if counters is None
            else sealer.seal_json(sealer.open_json(counters, run_id, "counters"), run_id, "counters"),
            "error": None
            if error is None
            else sealer.seal_text(sealer.open_text(error, run_id, "last_error"), run_id, "last_error"),
            "head_digest": None if head is None else keyed_of.get(bytes(head), bytes(head)),
        },
    )
    return Resealed(changed, True)


def _reseal_calls(run_ref: int, run_id: str, sealer: Sealer) -> Op[int]:
    """A run's call journal entries under the writing data key (how many changed).

    An entry written before the store was encrypted has a plaintext result, or (an intent)
    the plain digest of an empty result: its digests are keyed now too, so that a request
    recorded before still compares equal (``same_request``) and its intent is still found
    in flight. A sealed result was written with the digests keyed already.
    """
    writing, changed = sealer.writing.key_id, 0
    for call in (yield Query("sealed_calls", {"run_ref": run_ref})):
        place = "call:" + call.key
        result, digest, request = call.result, call.digest, call.request
        if result is None:
            plain = digest is not None and bytes(digest) == entry_digest(call.key, b"")
            if not plain:
                continue
        elif _under(result, writing):
            continue
        else:
            plain = not is_sealed(bytes(result))
            result = sealer.seal(sealer.open(result, run_id, call.step, place), run_id, call.step, place)
        if plain:
            digest = None if digest is None else sealer.keyed(bytes(digest))
            request = None if request is None else sealer.keyed(bytes(request))
        params = {"run_ref": run_ref, "key": call.key, "result": result, "request": request, "digest": digest}
        yield Query("reseal_call", params)
        changed += 1
    return changed


BlobFailures = list[tuple[str, SafepointError]]  # (digest, why it could not be sealed)


def reseal_blobs(after: str, limit: int, sealer: Sealer) -> Op[tuple[int, str | None, BlobFailures]]:
    """A page of the database blob table under the writing data key: (blobs changed, next page
    start, the blobs that do not open — damaged, or under a key the keyring lacks — left as they are)."""
    rows = yield Query("blobs_after", {"after_digest": after, "limit": limit})
    changed = 0
    failed: BlobFailures = []
    for row in rows:
        stored = bytes(row.data)
        if _under(stored, sealer.writing.key_id):
            continue
        try:
            opened = sealer.open_blob if is_sealed(stored) else decode_stored
            data = opened(row.digest, stored)
        except (BlobCorrupt, MissingKey, InvalidKey) as exc:
            failed.append((str(row.digest), exc))
            continue
        yield Query("reseal_blob", {"digest": row.digest, "data": sealer.seal_blob(row.digest, data)})
        changed += 1
    return changed, rows[-1].digest if len(rows) == limit else None, failed


def sealed_key_ids(run_ref: int) -> Op[tuple[Counter[str], int]]:
    """The data key ids of every sealed value of one run, counted, and how many values are plaintext."""
    found = yield Query("sealed_run_read", {"run_ref": run_ref})
    rows = yield Query("sealed_rows", {"run_ref": run_ref})
    ids: Counter[str] = Counter()
    plain = 0
    values: list[Any] = [getattr(row, column) for row in rows for column in _ROW_COLUMNS]
    values += [call.result for call in (yield Query("sealed_calls", {"run_ref": run_ref}))]
    for run in found:
        values += [
            _sealed_bytes(run.labels, labels=True),
            _sealed_bytes(run.counters),
            _sealed_bytes(run.last_error),
        ]
    for value in values:
        if value is None or not len(value):
            continue
        key = key_of(bytes(value)) if is_sealed(bytes(value)) else None
        if key is None:
            plain += 1
        else:
            ids[key] += 1
    return ids, plain


def _sealed_bytes(value: str | None, *, labels: bool = False) -> bytes | None:
    """The sealed bytes of a text or JSON column's value; its text when it is not sealed (plaintext)."""
    if value is None:
        return None
    text: Any = value
    if text.startswith(("{", '"')):
        decoded = codec.decode(text)
        text = decoded.get("", text) if labels and type(decoded) is dict else decoded
    if type(text) is str and text.startswith(TEXT_PREFIX):
        try:
            return base64.b64decode(text[len(TEXT_PREFIX) :])
        except ValueError:
            pass
    return value.encode()


def _under(value: Any, key_id: str) -> bool:
    """Whether a bytes value is empty or sealed under ``key_id`` already."""
    if value is None or not len(value):
        return True
    data = bytes(value)
    return is_sealed(data) and key_of(data) == key_id


def _under_text(value: str | None, key_id: str, *, labels: bool = False) -> bool:
    """The same for a text or JSON column's sealed form (``sp1:`` base64, a JSON string, labels)."""
    return _under(_sealed_bytes(value, labels=labels), key_id)


def key_of(sealed: bytes) -> str | None:
    """The data key id a sealed value names; None when it names none (cut short, or plaintext)."""
    try:
        return key_id_of(sealed)
    except SealBroken:  # not a sealed value: reseal reports it when it opens it
        return None


def scrub_free_pages() -> Op[None]:
    """SQLite: the pages plaintext left behind (free pages, the WAL) zeroed and dropped."""
    if (yield Query("secure_delete", optional=True)) is UNSUPPORTED:
        return  # PostgreSQL: docs/encryption.md says what its operator does instead
    yield Query("end_transaction", optional=True)  # VACUUM and a WAL truncation run outside a transaction
    yield Query("vacuum", optional=True)
    yield Query("wal_truncate", optional=True)
    yield Query("begin_transaction", optional=True)
