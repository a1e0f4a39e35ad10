"""Large values by reference: strings too big to inline go to a blob store.

On save, after scrubbing, every string in a checkpoint longer than the
threshold (64 KiB of UTF-8 by default; per-path rules may lower or raise it),
and every ``bytes`` value, is replaced by a ``BlobLink``
(``{"$blob": {"sha256", "size", "media_type"}}``) and its bytes are queued
for the blob store. Only a ``BlobLink`` counts as a reference: by now every
``$`` key that came from input has been escaped (``safepoint.refs``).
``ops.save`` writes them inside the save's transaction, before the
checkpoint row — so a blob is durable before any checkpoint that
references it commits, and a crash in between leaves an orphan blob,
never a dangling reference. On load the references are replaced by the
values again (or left as references, for a caller who wants to fetch
them lazily).

Content addressing makes the same output stored once, across steps and runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from safepoint import codec
from safepoint.blobs.base import BLOB_KEY, BlobRef, blob_digest
from safepoint.errors import InvalidArgument
from safepoint.refs import BlobLink, ScrubbedText, SecretRef

DEFAULT_THRESHOLD = 64 * 1024
_MAX_THRESHOLD = 2**62  # bytes; anything larger is "never", and must still compare as an int
TEXT = "text/plain; charset=utf-8"
BINARY = "application/octet-stream"
BLOB_MARK = b'"' + BLOB_KEY.encode() + b'"'


@dataclass(frozen=True, slots=True)
class BlobPolicy:
    """When a string is offloaded: longer than ``threshold`` bytes (UTF-8), or
    than the threshold of the longest matching path prefix in ``rules``
    (e.g. ``{"state.documents": 4096, "messages": 1_000_000}``)."""

    threshold: int = DEFAULT_THRESHOLD
    rules: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.rules, Mapping):
            raise InvalidArgument("blob_rules must map path prefixes to thresholds")
        for name, value in (("threshold", self.threshold), *self.rules.items()):
            if not isinstance(name, str):
                raise InvalidArgument("blob_rules keys must be path prefixes (str)")
            if type(value) is not int or not 0 <= value <= _MAX_THRESHOLD:
                what = "blob_threshold" if name == "threshold" else "a blob_rules threshold"
                raise InvalidArgument(f"{what} must be an int from 0 to 2**62")

    @property
    def smallest(self) -> int:
        return min((self.threshold, *self.rules.values()))

    def threshold_for(self, path: str) -> int:
        best, best_len = self.threshold, -1
        for prefix, value in self.rules.items():
            matches = path == prefix or path.startswith((prefix + ".", prefix + "["))
            if matches and len(prefix) > best_len:
                best, best_len = value, len(prefix)
        return best


class BlobSink:
    """One save's blobs: new values to write, and every digest its row references."""

    def __init__(self) -> None:
        self.pending: dict[str, bytes] = {}
        self.digests: set[str] = set()

    def add(self, data: bytes, media_type: str = TEXT) -> BlobLink:
        digest = blob_digest(data)
        self.pending.setdefault(digest, data)
        self.digests.add(digest)
        return BlobLink(digest, len(data), media_type)


def might_hold_blobs(encoded: bytes, policy: BlobPolicy) -> bool:
    """Whether a value with these canonical bytes could need offloading or hold a reference."""
    return len(encoded) > policy.smallest or BLOB_MARK in encoded


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


def offload_encoded(value: Any, encoded: bytes, root: str, policy: BlobPolicy, sink: BlobSink) -> bytes:
    """Canonical bytes of ``value`` after offloading, given its canonical bytes."""
    if not might_hold_blobs(encoded, policy):
        return encoded
    return codec.encode(offload(value, root, policy, sink))


def find_refs(value: Any, out: list[BlobRef]) -> list[BlobRef]:
    """Every blob reference inside a loaded ``value`` (its ``BlobLink``s)."""
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


def find_stored_refs(value: Any, out: list[str]) -> list[str]:
    """The digests of every blob reference in a *stored* value (decoded, not
    yet typed): there, a dict whose one key is ``$blob`` was written by the store."""
    if isinstance(value, dict):
        body = value.get(BLOB_KEY) if len(value) == 1 else None
        if isinstance(body, dict) and isinstance(body.get("sha256"), str):
            out.append(body["sha256"])
        else:
            for child in value.values():
                find_stored_refs(child, out)
    elif isinstance(value, list):
        for child in value:
            find_stored_refs(child, out)
    return out


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


def blob_digests_json(sink: BlobSink) -> str | None:
    """The row's ``blobs`` column: sorted digests as JSON, or NULL."""
    return codec.encode(sorted(sink.digests)).decode() if sink.digests else None
