"""Large values by reference: out of a checkpoint on save, back in on load.

Strings too big to inline, and every ``bytes`` value, go to a blob store.

On save, after scrubbing, every string in a checkpoint longer than the
threshold (64 KiB of UTF-8 by default; per-path rules may lower or raise it),
and every ``bytes`` value, is replaced by a ``BlobLink``
(``{"$blob": {"sha256", "size", "media_type"}}``) and its bytes are queued
for the blob store. Only a ``BlobLink`` counts as a reference: by now every
``$`` key that came from input has been escaped (``safepoint.refs``).
The save makes them durable before its checkpoint row commits (the blob
target's ``put_all`` before the transaction, ``write`` inside it:
``blob_targets.py``), so a crash in between leaves an orphan blob, never a
dangling reference. On load the references are replaced by the values
again (``inline_blobs``; or left as references, for a caller who wants to
fetch them lazily).

Content addressing makes the same output stored once, across steps and runs.

Finding blob references is here too: the one scanner every save, load, fork
and GC uses. A reference is recognised in one place. In a loaded value it is
a ``BlobLink`` (typed by ``references.from_stored``, which alone decides what
the store wrote: a single-``$`` key in format 2, input keys being escaped);
``find_refs`` walks a value for them. Stored bytes are first looked at for
``BLOB_MARK`` — canonical JSON of a reference always shows it, so a body
without it holds none and is never decoded — and only the ones that show it
are typed and walked (``stored_digests``). So the digests a row's ``blobs``
column records (what garbage collection keeps) are exactly the references a
load of that row would follow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from safepoint import codec
from safepoint.blobs.base import BLOB_KEY, BlobRef, blob_digest
from safepoint.errors import BlobCorrupt, BlobNotFound, InvalidArgument
from safepoint.messagelist import MessageList, freeze
from safepoint.model import VALUE_FIELDS, Checkpoint
from safepoint.refs import BlobLink, ScrubbedText, SecretRef

from .blob_targets import BlobTarget
from .references import from_stored

DEFAULT_THRESHOLD = 64 * 1024
_MAX_THRESHOLD = 2**62  # bytes; anything larger is "never", and must still compare as an int
TEXT = "text/plain; charset=utf-8"
BINARY = "application/octet-stream"


@dataclass(frozen=True, slots=True)
class BlobPolicy:
    """When a string is offloaded: longer than ``threshold`` bytes (UTF-8), or
    than the threshold of the longest matching path prefix in ``rules``
    (e.g. ``{"state.documents": 4096, "messages": 1_000_000}``)."""

    threshold: int = DEFAULT_THRESHOLD
    rules: Mapping[str, int] = field(default_factory=dict)
    # The least threshold, looked up by every save (might_hold_blobs): worked out once.
    smallest: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.rules, Mapping):
            raise InvalidArgument("blob_rules must map path prefixes to thresholds")
        for name, value in (("threshold", self.threshold), *self.rules.items()):
            if not isinstance(name, str):
                raise InvalidArgument("blob_rules keys must be path prefixes (str)")
            if type(value) is not int or not 0 <= value <= _MAX_THRESHOLD:
                what = "blob_threshold" if name == "threshold" else "a blob_rules threshold"
                raise InvalidArgument(f"{what} must be an int from 0 to 2**62")
        object.__setattr__(self, "smallest", min((self.threshold, *self.rules.values())))

    def threshold_for(self, path: str) -> int:
        best, best_len = self.threshold, -1
        for prefix, value in self.rules.items():
            matches = path == prefix or path.startswith((prefix + ".", prefix + "["))
            if matches and len(prefix) > best_len:
                best, best_len = value, len(prefix)
        return best


@dataclass(slots=True)
class BlobSink:
    """One save's blobs: new values to write, and every digest its row references.

    ``digest_of`` is the blob target's (keyed on an encrypted store)."""

    digest_of: Callable[[bytes], str] = blob_digest
    pending: dict[str, bytes] = field(default_factory=dict)
    digests: set[str] = field(default_factory=set)

    def add(self, data: bytes, media_type: str = TEXT) -> BlobLink:
        digest = self.digest_of(data)
        self.pending.setdefault(digest, data)
        self.digests.add(digest)
        return BlobLink(digest, len(data), media_type)


# How many ``$`` bytes ``shows_dollar_mark`` looks at one by one before it lets
# ``in`` scan the rest (text full of prices): the common body has none.
_DOLLARS_LOOKED_AT = 4


def shows_dollar_mark(data: bytes, mark: bytes) -> bool:
    """``mark in data`` for a mark whose second byte is ``$`` (a stored ``"$`` key,
    a blob reference): found by that rare byte (``bytes.find`` of one byte is a
    ``memchr``) instead of a substring search, several times cheaper on text with
    no ``$`` at all."""
    at = data.find(b"$", 1)
    for _ in range(_DOLLARS_LOOKED_AT):
        if at == -1:
            return False
        if data.startswith(mark, at - 1):
            return True
        at = data.find(b"$", at + 1)
    return at != -1 and mark in data


def might_hold_blobs(encoded: bytes, policy: BlobPolicy) -> bool:
    """Whether a value with these canonical bytes could need offloading or hold a reference."""
    return len(encoded) > policy.smallest or shows_dollar_mark(encoded, BLOB_MARK)


def offload(value: Any, root: str, policy: BlobPolicy, sink: BlobSink) -> Any:
    """``value`` with every oversized string — and every ``bytes`` value, whatever
    its size (JSON cannot hold bytes) — replaced by a blob reference (a new object
    where anything changed); existing references are recorded in ``sink``."""
    if isinstance(value, bytes):
        return sink.add(value, BINARY)
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        if len(data) > policy.threshold_for(root):
            return sink.add(data)
        return value
    if isinstance(value, dict):
        if isinstance(value, BlobLink):
            sink.digests.add(value.digest)
            return value
        return {k: offload(v, _child(root, k), policy, sink) for k, v in value.items()}
    if isinstance(value, list):
        return [offload(v, f"{root}[{i}]", policy, sink) for i, v in enumerate(value)]
    return value


def _child(root: str, key: str) -> str:
    return codec.join_path([root, codec.key_segment(key, 0)])


def offload_fields(values: Mapping[str, Any], policy: BlobPolicy, sink: BlobSink) -> dict[str, Any]:
    """A checkpoint header's value fields (field name to value) with their large values and
    ``bytes`` out to ``sink``, each field looked at as a whole first."""
    out = {}
    for name, value in values.items():
        try:
            needed = might_hold_blobs(codec.encode(value), policy)
        except TypeError:  # bytes (JSON has none): they go to the blob store
            needed = True
        out[name] = offload(value, name, policy, sink) if needed else value
    return out


def offload_encoded(value: Any, encoded: bytes, root: str, policy: BlobPolicy, sink: BlobSink) -> bytes:
    """Canonical bytes of ``value`` after offloading, given its canonical bytes."""
    if not might_hold_blobs(encoded, policy):
        return encoded
    return codec.encode(offload(value, root, policy, sink))


def inline(value: Any, fetched: Mapping[str, bytes]) -> Any:
    """A copy of ``value`` with each ``BlobLink`` replaced by its value (text, or bytes)."""
    if isinstance(value, dict):
        if isinstance(value, BlobLink):
            data = fetched[value.digest]
            if value.media_type != TEXT:
                return data
            text = data.decode("utf-8", "surrogatepass")
            if value.marks and value.marks[-1][1] <= len(text):
                return ScrubbedText(text, value.marks)
            return text
        if isinstance(value, SecretRef):
            return value  # a rebuilt plain dict would be input on the next save
        return {k: inline(v, fetched) for k, v in value.items()}
    if isinstance(value, list):
        return [inline(v, fetched) for v in value]
    return value


def inline_blobs(
    cp: Checkpoint,
    target: BlobTarget,
    *,
    fetched: Mapping[str, bytes],
    message_indexes: list[int] | None,
) -> Checkpoint:
    """``cp`` with its blob references replaced by their values (in place).

    ``message_indexes`` are the messages known to hold references (None: look
    at every message, e.g. after a migration). ``fetched`` holds stored blobs
    the database target read in the load's transaction (verified here); the
    rest come from the blob store. A missing or altered blob raises
    ``BlobNotFound``/``BlobCorrupt`` naming run, step and digest.
    """
    messages = cp.messages
    assert isinstance(messages, MessageList)
    indexes = range(len(messages)) if message_indexes is None else message_indexes
    refs = checkpoint_refs(cp, indexes)
    if not refs:
        return cp
    try:
        values = target.fetch(sorted({ref.digest for ref in refs}), fetched)
    except BlobCorrupt as exc:
        raise BlobCorrupt(exc.digest, exc.detail, cp.run_id, cp.step) from exc
    except BlobNotFound as exc:
        raise BlobNotFound(
            exc.digest, f"referenced by run {cp.run_id!r} step {cp.step}, but missing"
        ) from exc
    restored = MessageList(messages, messages.stored)
    restored.clean_prefix = messages.clean_prefix
    for index in indexes:
        restored_message = inline(messages[index], values)
        list.__setitem__(restored, index, freeze(restored_message))
    cp.messages = restored
    for name in VALUE_FIELDS:
        setattr(cp, name, inline(getattr(cp, name), values))
    return cp


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
