"""Secrets back on load, for a caller who asks: only where the store wrote a reference.

``load(..., resolve_secrets=…)`` hands a loaded checkpoint to :func:`restore`.
It replaces a :class:`~safepoint.refs.SecretRef` by the value, and inside a
:class:`~safepoint.refs.ScrubbedText` the ``[SECRET:NAME|enc]`` markers at its
recorded spans by the value in that encoding. Nothing else is looked at:
marker-shaped text and ``{"$secret": …}`` dicts that came from input are
plain data here (DESIGN invariant 8), so input can never name a secret and
have it read out. Dict keys, labels and counter names hold markers as plain
text (they must stay strings), so they are never resolved either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from safepoint.errors import UnknownSecret
from safepoint.refs import ScrubbedText, SecretRef

from .encodings import encode_as
from .known import MARKER, Secrets


def restore_text(text: ScrubbedText, lookup: Callable[[str], str]) -> str:
    """``text`` with the secret markers at its spans put back (exact encodings only).

    A ``base64-part`` marker (a secret inside a longer base64 token) and
    ``[REDACTED:…]`` markers stay as they are: what surrounded them cannot be
    rebuilt. What remains is a ``ScrubbedText`` again, so a later save keeps them.
    """
    pieces: list[str] = []
    kept: list[tuple[int, int]] = []
    last = 0
    length = 0
    for start, end in text.marks:
        pieces.append(text[last:start])
        length += start - last
        piece = text[start:end]
        match = MARKER.fullmatch(piece)
        encoded = None if match is None else encode_as(lookup(match.group(1)), match.group(2) or "raw")
        if encoded is None:
            kept.append((length, length + len(piece)))
        else:
            piece = encoded
        pieces.append(piece)
        length += len(piece)
        last = end
    pieces.append(text[last:])
    out = "".join(pieces)
    return ScrubbedText(out, kept) if kept else out


def restore(value: Any, lookup: Callable[[str], str]) -> Any:
    """A copy of ``value`` with store-written secret references resolved by ``lookup``."""
    if isinstance(value, str):
        return restore_text(value, lookup) if isinstance(value, ScrubbedText) else value
    if isinstance(value, dict):
        if isinstance(value, SecretRef):
            return lookup(value.name)
        return {k: restore(v, lookup) for k, v in value.items()}
    if isinstance(value, list):
        return [restore(v, lookup) for v in value]
    return value


def lookup_for(resolver: Secrets | Callable[[str], str | None]) -> Callable[[str], str]:
    """A name -> value function that raises ``UnknownSecret`` for names it lacks."""
    if isinstance(resolver, Secrets):
        return resolver.value

    def lookup(name: str) -> str:
        value = resolver(name)
        if not isinstance(value, str):
            raise UnknownSecret(name)
        return value

    return lookup
