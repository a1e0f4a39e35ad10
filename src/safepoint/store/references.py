"""Store-written references in their stored form, and back to their types.

The contract is in ``safepoint.refs``: in a stored value (format 2), a dict
key that begins with a single ``$`` was written by the store — every input
key beginning with ``$`` gets one more on save. So a load can trust exactly
three shapes and nothing else:

* ``{"$secret": NAME}``                   → :class:`SecretRef`
* ``{"$marks": [[s, e], …], "$text": T}`` → :class:`ScrubbedText`
* ``{"$blob": {sha256, size, media_type}}`` → :class:`BlobLink`

Rows written before format 2 (no ``format`` in the header) did not escape
input, so there a look-alike cannot be told from a reference. For them only
the secret names the row's own scrub report recorded are trusted (a forged
``[SECRET:NAME]`` for any other name stays text), and blob references are
trusted as before.

Both directions walk a value only when its text shows a ``$`` key could be
there; the common message has none and costs one substring search.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from safepoint.blobs.base import BlobRef
from safepoint.errors import InvalidArgument
from safepoint.messagelist import MessageList, freeze
from safepoint.model import VALUE_FIELDS, Checkpoint
from safepoint.refs import (
    BLOB_KEY,
    MARKS_KEY,
    SECRET_KEY,
    TEXT_KEY,
    BlobLink,
    ScrubbedText,
    SecretRef,
    link_form,
    text_form,
)
from safepoint.scrub.known import MARKER

from .log_rows import marked

FORMAT = 2  # the header's "format": store-written references are typed, input is escaped
LEGACY_FORMAT = 1
_REF_FIELDS = frozenset({"sha256", "size", "media_type"})
KEY_MARK = b'"$'  # every stored `$` key, escaped or store-written, shows this in canonical JSON
LEGACY_MARKS = (KEY_MARK, b"[SECRET:")


def shapes(stored_format: int) -> tuple[bytes, ...]:
    """What a stored value of ``stored_format`` shows when it holds something to type."""
    return LEGACY_MARKS if stored_format < FORMAT else (KEY_MARK,)


def may_need_stored_form(encoded: bytes) -> bool:
    """Whether a value with these canonical bytes may hold a ``$`` key or scrubbed text."""
    # One memchr for "[" first: a header with no list and no scrubbed text (most) skips the two
    # longer searches, each of which sets its search up anew on every call. ``find``, not ``in``:
    # ``b"[" in encoded`` first tries b"[" as an int, making and clearing a TypeError each time.
    find = encoded.find
    return find(KEY_MARK) >= 0 or (find(b"[") >= 0 and (find(b"[SECRET:") >= 0 or find(b"[REDACTED:") >= 0))


def escape_key(key: str) -> str:
    """An input dict key as stored: one more ``$`` if it begins with one."""
    return "$" + key if key[:1] == "$" else key


def to_stored(value: Any) -> Any:
    """``value`` in stored form, for a store without a scrubber (the scrubber's
    walk does the same as it scrubs): input ``$`` keys escaped, references as
    their dicts, scrubbed text with its marks."""
    if isinstance(value, str):
        return text_form(value) if isinstance(value, ScrubbedText) else value
    if isinstance(value, dict):
        if isinstance(value, BlobLink):
            return link_form(value)
        if isinstance(value, SecretRef):
            return value
        return {escape_key(k): to_stored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_stored(v) for v in value]
    return value


def from_stored(value: Any, legacy_names: Collection[str] | None = None) -> Any:
    """A stored value with store-written references as their types and input
    keys unescaped. ``legacy_names``: the value comes from a row written before
    format 2, and these are the secret names its scrub report recorded."""
    if legacy_names is not None:
        return _from_legacy(value, legacy_names)
    if isinstance(value, dict):
        ref = _reference(value)
        if ref is not None:
            return ref
        return {(k[1:] if k[:2] == "$$" else k): from_stored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_stored(v) for v in value]
    return value


def _reference(value: dict[str, Any]) -> Any:
    """The typed reference a single-``$`` dict stands for, or None (a plain dict)."""
    if len(value) == 1:
        if SECRET_KEY in value and isinstance(value[SECRET_KEY], str):
            return SecretRef(value[SECRET_KEY])
        if BLOB_KEY in value:
            return _blob_link(value[BLOB_KEY])
    elif len(value) == 2 and TEXT_KEY in value and MARKS_KEY in value:
        text, marks = value[TEXT_KEY], value[MARKS_KEY]
        if isinstance(text, str):
            spans = _spans(marks, len(text))
            return None if spans is None else ScrubbedText(text, spans)
        # Large scrubbed text in the blob store: the marks go with the link,
        # and become the text's when the value is fetched.
        body = text.get(BLOB_KEY) if isinstance(text, dict) and len(text) == 1 else None
        link = _blob_link(body)
        spans = _spans(marks, 1 << 62)
        if link is not None and spans is not None:
            return BlobLink(link.digest, link.size, link.media_type, spans)
    return None


def _spans(marks: Any, length: int) -> list[tuple[int, int]] | None:
    """Sorted, disjoint, in-bounds spans, or None if ``marks`` is anything else."""
    if not isinstance(marks, list):
        return None
    out: list[tuple[int, int]] = []
    last = 0
    for span in marks:
        if not (isinstance(span, list) and len(span) == 2):
            return None
        start, end = span
        if type(start) is not int or type(end) is not int or not last <= start < end <= length:
            return None
        out.append((start, end))
        last = end
    return out


def _blob_link(body: Any) -> BlobLink | None:
    """A ``BlobLink`` for a well-formed reference body, else None (then it is data)."""
    if not isinstance(body, dict) or set(body) != _REF_FIELDS:
        return None
    try:
        ref = BlobRef(body["sha256"], body["size"], body["media_type"])
    except InvalidArgument:
        return None
    return BlobLink(ref.digest, ref.size, ref.media_type)


def _from_legacy(value: Any, names: Collection[str]) -> Any:
    if isinstance(value, str):
        if "[SECRET:" not in value:
            return value
        spans = [m.span() for m in MARKER.finditer(value) if m.group(1) in names]
        return ScrubbedText(value, spans) if spans else value
    if isinstance(value, dict):
        if len(value) == 1:
            secret = value.get(SECRET_KEY)
            if isinstance(secret, str) and secret in names:
                return SecretRef(secret)
            if BLOB_KEY in value:
                link = _blob_link(value[BLOB_KEY])
                if link is not None:
                    return link
        return {k: _from_legacy(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_legacy(v, names) for v in value]
    return value


def legacy_secret_names(rules: Collection[str]) -> frozenset[str]:
    """The secret names a legacy row's scrub report recorded (rules ``secret:NAME``)."""
    return frozenset(rule[7:] for rule in rules if rule.startswith("secret:"))


def typed_checkpoint(
    cp: Checkpoint,
    stored_format: int,
    bodies: Sequence[bytes | memoryview],
    header: bytes,
    found: dict[bytes, list[int]] | None = None,
) -> Checkpoint:
    """A loaded checkpoint (stored form, ``bodies`` and ``header`` as read) as
    callers see it, in place: only values whose bytes show a ``$`` key (or, in
    a legacy row, a marker) are walked, so a plain message costs one search.
    ``found``: the bodies that show each of ``shapes(stored_format)``, when the
    load searched them as it read them (``stored.decode_checkpoint``; its
    bodies are gone then)."""
    names = None
    marks = shapes(stored_format)
    messages = cp.messages
    assert isinstance(messages, MessageList)
    if stored_format < FORMAT:
        names = legacy_secret_names(cp.scrub_report.by_rule())
        # The next save compares every message with the stored bytes: one
        # whose format-2 form differs is written anew, so no legacy body is
        # ever read under a format-2 header (a range has one format).
        messages.clean_prefix = 0
    indexes = marked(bodies, marks) if found is None else sorted({i for mark in marks for i in found[mark]})
    for index in indexes:
        list.__setitem__(messages, index, freeze(from_stored(messages[index], names)))
    if any(header.find(shape) >= 0 for shape in marks):  # find: see log_rows._shows
        for name in VALUE_FIELDS:
            setattr(cp, name, from_stored(getattr(cp, name), names))
    return cp
