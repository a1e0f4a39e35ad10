"""Registered secrets: the values a harness holds, found in every encoding.

A harness knows its own credentials (API keys, database passwords). It
registers them here by name; the scrubber then finds each value wherever it
appears — as a whole string, inside text, and in the encodings a harness
produces: JSON-escaped (also twice), URL-encoded, base64 and base64url (at any
alignment, so inside ``Authorization: Basic`` headers too). All variants of
all secrets go into one Aho-Corasick automaton, so the cost of a scan does not
grow with the number of secrets.

What a match becomes (``reference`` policy):

* a string that *is* the secret → ``{"$secret": "NAME"}``
* a secret inside text → ``[SECRET:NAME]`` (raw) or ``[SECRET:NAME|enc]``
  where ``enc`` names the encoding, so ``restore`` can put back exactly the
  text that was there. A base64 match that is only part of a longer base64
  token (``user:password`` in a Basic header) becomes
  ``[SECRET:NAME|base64-part]``, which stays a marker on restore: the
  surrounding bits cannot be rebuilt.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus

import orjson

from safepoint.errors import InvalidArgument, UnknownSecret

from .matcher import Matcher

MIN_SECRET_LENGTH = 8
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
# Markers are plain ASCII: they survive JSON, URL and log round trips unchanged.
MARKER = re.compile(r"\[SECRET:([A-Za-z0-9_.\-]{1,128})(?:\|([a-z0-9\-]+))?\]")
_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_=")


@dataclass(frozen=True, slots=True)
class _Variant:
    name: str
    encoding: str  # "raw", "json", "url", "base64", "base64-core", …
    length: int


def _json_escaped(value: str) -> str:
    return orjson.dumps(value).decode()[1:-1]


def _encodings(value: str) -> dict[str, str]:
    """Every exact encoding of ``value`` the scrubber looks for, by name."""
    raw = value.encode()
    out = {
        "raw": value,
        "json": _json_escaped(value),
        "json-ascii": json.dumps(value)[1:-1],
        "json2": _json_escaped(_json_escaped(value)),
        "url": quote(value, safe=""),
        "url-path": quote(value),
        "url-plus": quote_plus(value),
        "base64": base64.b64encode(raw).decode(),
        "base64url": base64.urlsafe_b64encode(raw).decode(),
    }
    for name in ("url", "url-path", "url-plus"):
        out[name + "-lower"] = re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), out[name])
    return out


def _encode(value: str, encoding: str) -> str | None:
    """Re-encode ``value`` for ``restore`` (None: not restorable)."""
    return _encodings(value).get(encoding)


def _base64_cores(value: str) -> list[tuple[str, str]]:
    """The base64 characters that depend only on ``value``, at each of the three
    byte alignments it can have inside a longer base64-encoded text."""
    raw = value.encode()
    cores = []
    for align in range(3):
        encoded = base64.b64encode(bytes(align) + raw).decode()
        start = -(-8 * align // 6)  # first char made only of the value's bits
        end = (8 * (align + len(raw))) // 6  # chars after this mix in what follows
        core = encoded[start:end]
        cores.append(("base64-part", core))
        cores.append(("base64-part", core.replace("+", "-").replace("/", "_")))
    return cores


class Secrets:
    """The secrets a harness holds, by name: what the scrubber must never store.

    >>> secrets = Secrets().add("OPENAI_API_KEY", "sk-example-0123456789")
    >>> secrets.names()
    ['OPENAI_API_KEY']

    Values come from ``add`` (name and value), ``add_env`` (environment
    variable names) or ``add_source`` (a callable, e.g. a vault lookup, called
    at registration and again on ``refresh``). Names appear in stored
    references; values never leave this object except through ``value`` or a
    ``restore`` the caller asks for.
    """

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._values: dict[str, str] = {}
        self._sources: dict[str, Callable[[], str]] = {}
        self._lock = threading.Lock()
        self._automaton: Matcher[_Variant] | None = None
        self._prefilter: Matcher[bool] | None = None
        self.version = 0  # bumped on every change: caches of scrub results check it
        for name, value in (values or {}).items():
            self.add(name, value)

    def __repr__(self) -> str:  # never the values
        return f"Secrets({self.names()!r})"

    def add(self, name: str, value: str) -> Secrets:
        """Register ``value`` under ``name``; returns self so calls chain."""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise InvalidArgument(f"secret name {name!r} must be 1-128 letters, digits, '_', '.' or '-'")
        if not isinstance(value, str):
            raise InvalidArgument(f"secret {name!r} must be a str, not {type(value).__name__}")
        if len(value) < MIN_SECRET_LENGTH:
            raise InvalidArgument(
                f"secret {name!r} is {len(value)} characters; at least {MIN_SECRET_LENGTH} are needed "
                "to find it without redacting ordinary text"
            )
        with self._lock:
            self._values[name] = value
            self._automaton = self._prefilter = None
            self.version += 1
        return self

    def add_env(self, *names: str, environ: Mapping[str, str] | None = None) -> Secrets:
        """Register environment variables by name (their current values)."""
        env = os.environ if environ is None else environ
        for name in names:
            if name not in env:
                raise InvalidArgument(f"environment variable {name!r} is not set")
            self.add(name, env[name])
        return self

    def add_source(self, name: str, fetch: Callable[[], str]) -> Secrets:
        """Register a secret fetched by ``fetch()`` (now, and again on ``refresh``)."""
        self._sources[name] = fetch
        return self.add(name, fetch())

    def refresh(self) -> None:
        """Fetch every ``add_source`` secret again (after a rotation)."""
        for name, fetch in self._sources.items():
            self.add(name, fetch())

    def names(self) -> list[str]:
        return sorted(self._values)

    def value(self, name: str) -> str:
        """The value registered under ``name``; ``UnknownSecret`` if none."""
        try:
            return self._values[name]
        except KeyError:
            raise UnknownSecret(name) from None

    def __len__(self) -> int:
        return len(self._values)

    def automaton(self) -> Matcher[_Variant] | None:
        """The Aho-Corasick automaton over every variant of every value (cached)."""
        with self._lock:
            if self._automaton is None:
                self._automaton = _build_automaton(self._values)
            return self._automaton

    def prefilter(self) -> Matcher[bool] | None:
        """An automaton for the canonical JSON text of a whole field: every variant
        as it appears once more JSON-escaped there (the same text when the
        variant holds no quote, backslash or control character)."""
        with self._lock:
            if self._prefilter is None:
                self._prefilter = _build_prefilter(self._values)
            return self._prefilter


def _build_automaton(values: Mapping[str, str]) -> Matcher[_Variant] | None:
    words: dict[str, _Variant] = {}
    # Sorted for determinism: when two names share a value, the last one wins.
    for name, value in sorted(values.items()):
        for encoding, text in [*_encodings(value).items(), *_base64_cores(value)]:
            existing = words.get(text)
            # An exact encoding beats a base64 core that happens to be the same text.
            if existing is None or existing.encoding == "base64-part":
                words[text] = _Variant(name, encoding, len(text))
    return Matcher(words) if words else None


def _build_prefilter(values: Mapping[str, str]) -> Matcher[bool] | None:
    words = {
        _json_escaped(text): True
        for value in values.values()
        for _, text in [*_encodings(value).items(), *_base64_cores(value)]
    }
    return Matcher(words) if words else None


@dataclass(frozen=True, slots=True)
class Hit:
    start: int
    end: int
    name: str
    encoding: str


def find_known(automaton: Matcher[_Variant] | None, text: str) -> list[Hit]:
    """Non-overlapping hits of registered values in ``text``, longest first on overlap."""
    if automaton is None:
        return []
    hits = []
    for first, last, variant in automaton.find(text):
        span = (first, last, variant.encoding)
        if variant.encoding == "base64-part":
            span = _widen_base64(text, first, last, variant.name)
        hits.append(Hit(span[0], span[1], variant.name, span[2]))
    if len(hits) <= 1:
        return hits
    # Leftmost, then longest, then an exact encoding over a base64 fragment (restorable).
    hits.sort(key=lambda h: (h.start, -(h.end - h.start), h.encoding == "base64-part"))
    kept = [hits[0]]
    for hit in hits[1:]:
        if hit.start >= kept[-1].end:
            kept.append(hit)
        elif hit.end > kept[-1].end:  # overlapping: merge, keeping the first hit's name
            kept[-1] = Hit(kept[-1].start, hit.end, kept[-1].name, "base64-part")
    return kept


def _widen_base64(text: str, start: int, end: int, name: str) -> tuple[int, int, str]:
    """A base64 core leaves up to two characters each side that mix the secret's
    bits with its neighbours'; take them too, with any padding."""
    for _ in range(2):
        if start > 0 and text[start - 1] in _B64_ALPHABET and text[start - 1] != "=":
            start -= 1
    for _ in range(2):
        if end < len(text) and text[end] in _B64_ALPHABET and text[end] != "=":
            end += 1
    while end < len(text) and text[end] == "=":
        end += 1
    return start, end, "base64-part"


def marker(name: str, encoding: str) -> str:
    return f"[SECRET:{name}]" if encoding == "raw" else f"[SECRET:{name}|{encoding}]"
