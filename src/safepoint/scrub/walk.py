"""The walk over one value: every string (dict keys included) through the steps, in order.

Dicts, lists and ``bytes`` are walked into; what the store wrote on an earlier
save (``SecretRef``, ``BlobLink``) is kept in its stored form, and input dict
keys beginning with ``$`` are escaped (one more ``$``) so no input can pass
for a reference. ``bytes`` are scanned too (as UTF-8, bad bytes replaced) and,
if anything matches, replaced whole by a ``bytes`` placeholder. A private key
split into a list of lines is redacted line by line
(:mod:`safepoint.scrub.pem_lines`).

Short strings repeat from save to save (keys, labels, statuses, tool names):
with only the built-in steps, their result is cached, with the rules they
reported, and the cache is emptied when the registered secrets change.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol, cast

from safepoint.errors import InvalidArgument
from safepoint.refs import BlobLink, ScrubbedText, SecretRef, link_form, text_form

from .known import Secrets

_CACHE_MAX_TEXT = 256  # characters: longer strings are rarely repeated, and cost more to hash
_CACHE_SIZE = 8192  # entries; cleared when full (a save rarely needs more than a few dozen)
_Cache = dict[tuple[str, bool], tuple[Any, tuple[str, ...]]]


class Report(Protocol):
    """What the walk and the steps need of the record they report to (the scrubber's ``Found``):
    the ``policy``, where the walk is (``parts``, and ``as_key`` for a key or a label), the rules a
    short string's result is cached with (``names``, while the walk records them), ``add``, and a
    fresh ``probe`` for looking inside ``bytes``, whose ``counts`` name the rules found there."""

    policy: str
    parts: list[str | int]
    as_key: bool
    names: list[str] | None
    counts: Counter[tuple[str, str]]

    def add(self, rule: str, count: int = 1) -> None: ...

    def probe(self) -> Report: ...


class Step(Protocol):
    """One scrubber step: a string in, its stored form out; what it replaced reported to ``found``."""

    def __call__(self, text: str, found: Report) -> Any: ...


class Walk:
    """The steps applied to every string of a value, with the short-string cache."""

    def __init__(self, steps: tuple[Step, ...], secrets: Secrets, *, cacheable: bool) -> None:
        self.steps = steps
        self.secrets = secrets
        # Only the built-in steps are known to be deterministic enough to cache.
        self._cacheable = cacheable
        self._cache: _Cache = {}
        self._cache_version = secrets.version

    def mapping(self, mapping: dict[str, Any], found: Report, *, values_too: bool) -> dict[str, Any]:
        """A flat mapping with its keys — and string values, with ``values_too`` — scrubbed as
        strings (markers, never references)."""
        cache = self._live_cache()
        out: dict[str, Any] = {}
        for key, value in mapping.items():
            hit = cache.get((key, True)) if cache is not None and len(key) <= _CACHE_MAX_TEXT else None
            new_key = hit[0] if hit is not None and not hit[1] else self.key(key, found)
            new_value = value
            if values_too and isinstance(value, str):
                found.parts.append(new_key)
                found.as_key = True
                new_value = self.string(value, found)
                found.as_key = False
                found.parts.pop()
            out[new_key] = new_value
        return out

    def value(self, value: Any, found: Report) -> Any:
        """``value`` in stored form (the same object when nothing changed)."""
        if isinstance(value, str):
            return self.string(value, found)
        if isinstance(value, dict):
            if isinstance(value, SecretRef):
                return value  # written by the store on an earlier save: kept as it is
            if isinstance(value, BlobLink):
                return link_form(value)
            # Fast path for what most dicts hold: keys and short values the
            # cache knows to be clean, and numbers — no path bookkeeping.
            cache = self._live_cache()
            out: dict[str, Any] = {}
            for key, child in value.items():
                hit = cache.get((key, True)) if cache is not None and len(key) <= _CACHE_MAX_TEXT else None
                new_key = hit[0] if hit is not None and not hit[1] else self.key(key, found)
                if new_key[:1] == "$":
                    new_key = "$" + new_key  # input: only the store writes single-$ keys
                kind = type(child)
                if kind is str:
                    if cache is not None and len(child) <= _CACHE_MAX_TEXT:
                        hit = cache.get((child, False))
                        if hit is not None and not hit[1]:
                            out[new_key] = hit[0]
                            continue
                elif kind is int or kind is float or kind is bool or child is None:
                    out[new_key] = child
                    continue
                found.parts.append(new_key)
                out[new_key] = self.value(child, found)
                found.parts.pop()
            return out
        if isinstance(value, list):
            items = []
            for index, child in enumerate(value):
                found.parts.append(index)
                items.append(self.value(child, found))
                found.parts.pop()
            return self._split_keys(items, found)
        if isinstance(value, bytes):
            return self._bytes(value, found)
        return value

    def _split_keys(self, items: list[Any], found: Report) -> list[Any]:
        """A private key split into a list of lines (one string a line) is
        redacted line by line: no single line shows the rule its whole."""
        if not any(type(item) is str and "-----BEGIN" in item for item in items):
            return items
        from .pem_lines import PEM_RULE_NAME, pem_line_blocks  # noqa: PLC0415  (compiled on first use)

        blocks = pem_line_blocks(items)
        for first, last in blocks:
            found.parts.append(first)
            found.add(PEM_RULE_NAME)
            found.parts.pop()
            mark = f"[REDACTED:{PEM_RULE_NAME}]"
            for index in range(first, last + 1):
                items[index] = text_form(ScrubbedText(mark, [(0, len(mark))]))
        return items

    def _bytes(self, data: bytes, found: Report) -> bytes:
        """``data`` itself, or — when anything in it would be scrubbed — a
        ``bytes`` placeholder naming the rules: binary data is never edited
        inside (a patched archive or image would not decode), only replaced.

        The bytes are read as UTF-8 with each undecodable byte replaced, so
        one bad byte does not switch scanning off; text stored as UTF-16 is
        looked at for registered secrets too.
        """
        texts = [data.decode("utf-8", "replace")]
        if b"\x00" in data:
            texts += [data.decode("utf-16-le", "replace"), data.decode("utf-16-be", "replace")]
        names: list[str] = []
        for decoded in texts:
            # No prefilter here: it looks for secrets as they appear in JSON text
            # (quotes escaped), and this is raw text; each step scans it once.
            probe = found.probe()  # markers, never references: only the names are kept
            current = decoded
            for step in self.steps:
                result = step(current, probe)
                if isinstance(result, str):
                    current = result
            names.extend(rule for rule, _ in probe.counts)
        if not names:
            return data
        unique = list(dict.fromkeys(names))
        for name in unique:
            found.add(name)
        return f"[REDACTED:{','.join(unique)}]".encode()

    def key(self, key: str, found: Report) -> str:
        """A dict key scrubbed: always a str (markers as plain text, never a reference)."""
        found.parts.append("<key>")
        found.as_key = True
        try:
            return cast(str, self.string(key, found))
        finally:
            found.as_key = False
            found.parts.pop()

    def _live_cache(self) -> _Cache | None:
        """The short-string cache, emptied if secrets changed since; None if not cacheable."""
        if not self._cacheable:
            return None
        if self._cache_version != self.secrets.version:
            self._cache.clear()
            self._cache_version = self.secrets.version
        return self._cache

    def string(self, text: str, found: Report) -> Any:
        """One string through the steps, in stored form (a ``SecretRef`` when it is a secret)."""
        # Short strings repeat from save to save (keys, labels, statuses, tool
        # names): the built-in steps are deterministic, so their result for a
        # short string is remembered, with the rules it reported. Scrubbed
        # text from a load is never cached: it equals the plain text it shows.
        cacheable = self._cacheable and len(text) <= _CACHE_MAX_TEXT and type(text) is str
        if cacheable:
            self._live_cache()
            hit = self._cache.get((text, found.as_key))
            if hit is not None:
                for name in hit[1]:
                    found.add(name)
                return hit[0]
            found.names = []
        try:
            value: Any = text
            for step in self.steps:
                value = step(value, found)
                if not isinstance(value, str):
                    break
            if found.as_key:
                if not isinstance(value, str):
                    raise InvalidArgument("a scrubber step must return a str for dict keys and labels")
                value = str(value)  # keys and labels hold markers as plain text
            elif isinstance(value, ScrubbedText):
                value = text_form(value)
            if cacheable:
                if len(self._cache) >= _CACHE_SIZE:
                    self._cache.clear()
                assert found.names is not None
                self._cache[(text, found.as_key)] = (value, tuple(found.names))
            return value
        finally:
            found.names = None
