"""Finding blob references: the one scanner every save, load, fork and GC uses.

A reference is recognised in one place. In a loaded value it is a
``BlobLink`` (typed by ``references.from_stored``, which alone decides what
the store wrote: a single-``$`` key in format 2, input keys being escaped);
``find_refs`` walks a value for them. Stored bytes are first looked at for
``BLOB_MARK`` — canonical JSON of a reference always shows it, so a body
without it holds none and is never decoded — and only the ones that show it
are typed and walked (``stored_digests``). So the digests a row's ``blobs``
column records (what garbage collection keeps) are exactly the references
a load of that row would follow.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from safepoint import codec
from safepoint.blobs.base import BLOB_KEY, BlobRef
from safepoint.messagelist import MessageList
from safepoint.model import VALUE_FIELDS, Checkpoint
from safepoint.refs import BlobLink

from .references import from_stored

BLOB_MARK = b'"' + BLOB_KEY.encode() + b'"'
# The header fields that may hold references (counters and labels are scalars).
_HEADER_VALUES = VALUE_FIELDS


def find_refs(value: Any, out: list[BlobRef]) -> list[BlobRef]:
    """Every blob reference inside a loaded ``value`` (its ``BlobLink``s), appended to ``out``."""
    if isinstance(value, dict):
        if isinstance(value, BlobLink):
            out.append(BlobRef(value.digest, value.size, value.media_type))
        else:
            for child in value.values():
                find_refs(child, out)
    elif isinstance(value, list):
        for child in value:
            find_refs(child, out)
    return out


def checkpoint_refs(cp: Checkpoint, message_indexes: Iterable[int] | None = None) -> list[BlobRef]:
    """The references of a loaded checkpoint: its header values, then its messages
    (only those at ``message_indexes`` when the load knows which hold any)."""
    refs: list[BlobRef] = []
    for name in _HEADER_VALUES:
        find_refs(getattr(cp, name), refs)
    messages = cp.messages
    assert isinstance(messages, MessageList)  # Checkpoint.__setattr__ guarantees it
    for index in range(len(messages)) if message_indexes is None else message_indexes:
        find_refs(messages[index], refs)
    return refs


def find_stored_refs(value: Any, out: list[str]) -> list[str]:
    """The digests of every blob reference in a *stored* value (decoded, not yet
    typed), appended to ``out``: typed first, so a look-alike counts as it loads."""
    out.extend(ref.digest for ref in find_refs(from_stored(value), []))
    return out


def stored_digests(datas: Iterable[bytes]) -> set[str]:
    """The digests referenced by stored canonical JSON (a header, message bodies)."""
    digests: list[str] = []
    for data in datas:
        if BLOB_MARK in data:
            find_stored_refs(codec.decode(data), digests)
    return set(digests)


def digests_json(digests: Iterable[str]) -> str | None:
    """A row's ``blobs`` column: the digests it references, sorted, as JSON; NULL for none."""
    unique = sorted(set(digests))
    return codec.encode(unique).decode() if unique else None
