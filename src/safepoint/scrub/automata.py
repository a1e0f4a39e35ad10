"""Aho-Corasick automata: many literal strings found in one pass, and the ones over registered values.

:class:`Matcher` finds many literal strings in one pass over a text. Both
passes of the scrubber rest on it: the registered-secret variants and the
rule triggers (:mod:`safepoint.scrub.engine.scanner`) each become one
``Matcher``, so a scan costs one pass whatever the number of patterns.
ahocorasick-rs (a binding of Rust's aho-corasick crate, which ships wheels)
scans str in C-like time — about three times pyahocorasick's pace on this
machine — and reports Python character offsets.

The rest of this module is the registered values' automata. All variants of
all secrets (:mod:`safepoint.scrub.encodings`) go into one automaton, so the
cost of a scan does not grow with the number of secrets; each value has a
fixed number of variants, each a few times its length, so the automaton's
size grows only linearly with the values'. A second automaton, the
*prefilter*, looks at a whole field's canonical JSON text first. Base64 is
found at any alignment, and across the line breaks of MIME or PEM wrapping
(:func:`find_known`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Generic, TypeVar

from ahocorasick_rs import AhoCorasick, BytesAhoCorasick, Implementation

from .encodings import base64_cores, every_encoding, json_escaped

V = TypeVar("V")


class Matcher(Generic[V]):
    """Finds every occurrence of the ``words`` (each mapped to a value) in a text."""

    def __init__(self, words: Mapping[str, V]) -> None:
        patterns = [word for word in words if word]
        self._patterns = patterns
        self._values = [words[word] for word in patterns]
        self._longest = max(map(len, patterns), default=0)
        # Two searches over the same patterns, each built on first use (see _search): most texts
        # are ASCII, so the str one is often never needed. The DFA is the fastest to search and
        # small enough for a few thousand patterns.
        self._ascii: BytesAhoCorasick | None = None
        self._text: AhoCorasick | None = None

    def __len__(self) -> int:
        return len(self._values)

    def _search(self, text: str, overlapping: bool) -> list[tuple[int, int, int]]:
        """``(pattern index, start, end)`` of the matches in ``text``, in characters.

        An ASCII text (most of what agents write) is searched as its bytes: character
        and byte offsets are then the same, and the str search's mapping of byte offsets
        back to characters — as costly as the search itself — is skipped. A pattern
        holding non-ASCII characters has bytes no ASCII text holds, so the matches
        are the same.
        """
        if text.isascii():  # O(1): CPython records it on the str
            automaton = self._ascii
            if automaton is None:
                automaton = self._ascii = BytesAhoCorasick(
                    [word.encode() for word in self._patterns], implementation=Implementation.DFA
                )
            return automaton.find_matches_as_indexes(text.encode("ascii"), overlapping=overlapping)
        by_text = self._text
        if by_text is None:
            by_text = self._text = AhoCorasick(self._patterns, implementation=Implementation.DFA)
        try:
            return by_text.find_matches_as_indexes(text, overlapping=overlapping)
        except UnicodeEncodeError:
            return by_text.find_matches_as_indexes(_without_surrogates(text), overlapping=overlapping)

    def any(self, text: str) -> bool:
        """Whether any word occurs in ``text``.

        The automaton lists every match, so a text dense with words (a trigger every few
        characters over megabytes) is looked at in growing pieces — 4 KB, then 16 times more each
        time, overlapping by ``longest - 1`` — and the first piece with a match answers: a clean
        text still costs one pass (in a handful of calls), a dense one almost nothing.
        """
        if not self._patterns:
            return False
        size, cut, piece, reach = len(text), 0, _FIRST_LOOK, self._longest - 1
        while cut < size:
            part = text[cut : cut + piece + reach] if cut or piece < size else text
            if self._search(part, False):
                return True
            cut += piece
            piece *= 16
        return False

    def find(self, text: str) -> list[tuple[int, int, V]]:
        """Every occurrence, overlapping ones included: ``(start, end, value)``, by end offset."""
        if not self._patterns:
            return []
        values = self._values
        return [(start, end, values[index]) for index, start, end in self._search(text, True)]

    def find_within(self, text: str, spans: Sequence[tuple[int, int]]) -> Iterator[tuple[int, int, V]]:
        """Every occurrence that starts inside one of the sorted, disjoint ``spans``,
        as ``(start, end, value)`` in order of start.

        The text is searched a chunk at a time, so a dense text (a trigger every
        few characters over megabytes) never holds all its occurrences in memory
        at once; each chunk reaches ``longest - 1`` characters past its end so an
        occurrence across the cut is found, once, in the chunk where it starts.
        """
        if not self._patterns:
            return
        values, reach, size = self._values, self._longest - 1, _CHUNK
        by_start = itemgetter(1)
        for lo, hi in spans:
            for cut in range(lo, hi, size):
                stop = min(cut + size, hi)
                found = self._search(text[cut : stop + reach], True)
                found.sort(key=by_start)
                limit = stop - cut
                for index, start, end in found:
                    if start < limit:
                        yield cut + start, cut + end, values[index]


_CHUNK = 1 << 16  # characters per automaton call in find_within: bounded memory, negligible call overhead
_FIRST_LOOK = 1 << 12  # characters any() looks at first

_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (which UTF-8 cannot hold) as U+FFFD: one
    character for one, so offsets stay valid; no pattern contains either."""
    return _SURROGATE.sub("\ufffd", text)


# -- the registered values' automata ------------------------------------------------------


_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_=")
_BASE64_ENCODINGS = frozenset({"base64", "base64url", "base64-part"})
_WRAPPED = "base64-wrapped"  # not an encoding name: encode_as gives None, the marker stays


@dataclass(frozen=True, slots=True)
class Variant:
    """One text the automaton looks for: which secret it is, in which encoding."""

    name: str
    encoding: str  # "raw", "json", "url", "base64", "base64-part", …
    length: int
    # base64-part only: characters just outside the match that mix the value's
    # bits with its neighbours' (0 or 1 on each side, set by the alignment).
    lead: int = 0
    trail: int = 0


def _variants(value: str) -> list[tuple[str, str, int, int]]:
    return [*((enc, text, 0, 0) for enc, text in every_encoding(value).items()), *base64_cores(value)]


class _Automaton(Matcher[Variant]):
    """The automaton over every variant, with one over the base64 variants alone
    for the look across line breaks (so ordinary hits never trigger that look)."""

    def __init__(self, words: Mapping[str, Variant]) -> None:
        super().__init__(words)
        self.base64 = Matcher({text: v for text, v in words.items() if v.encoding in _BASE64_ENCODINGS})


def build_automaton(values: Mapping[str, str]) -> Matcher[Variant] | None:
    words: dict[str, Variant] = {}
    # Sorted for determinism: when two names share a value, the last one wins.
    for name, value in sorted(values.items()):
        for encoding, text, lead, trail in _variants(value):
            existing = words.get(text)
            # An exact encoding beats a base64 core that happens to be the same text.
            if existing is None or existing.encoding == "base64-part":
                words[text] = Variant(name, encoding, len(text), lead, trail)
    return _Automaton(words) if words else None


def _unwrapped(text: str) -> str:
    """``text`` without its line breaks (raw, or escaped once: base64 inside JSON
    text held as a string), so base64 wrapped in lines reads as one run.

    Every break goes, not only those between base64 characters: this only
    decides whether to look closer. str.replace runs in C, and the ``in``
    tests skip the forms a text lacks.
    """
    if "\\" in text:
        text = text.replace("\\r\\n", "").replace("\\n", "")
    if "\r" in text:
        text = text.replace("\r\n", "")
    return text.replace("\n", "")


# Base64 characters on one side of a line break that the field's look keys on:
# 11 carry 8 bytes of the value, as many as the shortest secret has, so ordinary
# text (which may share a word with a secret) does not set the look off.
_PIECE = 11
# How a field's JSON text writes a line break: escaped once (a real newline), or
# twice (JSON text held in a string).
_ESCAPED_BREAKS = ("\\n", "\\r\\n", "\\\\n", "\\\\r\\\\n")


def _broken_core(core: str) -> list[str]:
    """What a field's JSON text holds where a line break splits ``core`` (base64
    wrapped in lines at 11 columns or more, as MIME's 76 and PEM's 64), for a
    break at each position: the ``_PIECE`` characters after it with the
    escaped ``n`` every break form ends in, or when fewer follow, the ones
    before it with the backslash every form starts with; when neither side
    has that many (a short value), the whole core with each break form. A
    match only makes the scrubber walk the field, where ``find_known`` looks
    exactly."""
    words = []
    for at in range(1, len(core)):
        if len(core) - at >= _PIECE:
            words.append("\\n" + core[at : at + _PIECE])
        elif at >= _PIECE:
            words.append(core[at - _PIECE : at] + "\\")
        else:
            words.extend(core[:at] + line_break + core[at:] for line_break in _ESCAPED_BREAKS)
    return words


def prefilter_words(values: Mapping[str, str]) -> list[str]:
    """What a field's canonical JSON text shows where it holds one of ``values``:
    every variant JSON-escaped once more, and the base64 variants across line breaks."""
    words: dict[str, bool] = {}
    for value in values.values():
        for encoding, text, _, _ in _variants(value):
            words[json_escaped(text)] = True
            if encoding == "base64-part":  # base64 needs no JSON escaping
                words.update(dict.fromkeys(_broken_core(text), True))
    return list(words)


def build_prefilter(values: Mapping[str, str]) -> Matcher[bool] | None:
    words = prefilter_words(values)
    # One pass over the text whatever it holds: no join of lines before the look.
    return Matcher(dict.fromkeys(words, True)) if words else None


@dataclass(frozen=True, slots=True)
class Hit:
    start: int
    end: int
    name: str
    encoding: str


# A hit while hits are merged: (start, -end, is a base64 fragment, name, encoding),
# so that plain tuple order is leftmost, then longest, then exact (restorable) first.
_Span = tuple[int, int, bool, str, str]


def find_known(automaton: Matcher[Variant] | None, text: str) -> list[Hit]:
    """Non-overlapping hits of registered values in ``text``, longest first on overlap.

    Linear in the text and the number of hits: one automaton pass (two when
    base64 may be wrapped in lines), a sort, and one merge pass that compares
    each hit with the one being built only — never hit with hit.
    """
    if automaton is None:
        return []
    spans: list[_Span] = []
    for found_at, found_end, variant in automaton.find(text):
        start, end = found_at, found_end
        if variant.encoding == "base64-part":
            start, end = _widen_base64(text, start, end, variant)
        spans.append((start, -end, variant.encoding == "base64-part", variant.name, variant.encoding))
    if "\n" in text or "\\n" in text:
        base64 = automaton.base64 if isinstance(automaton, _Automaton) else automaton
        # A quick look first (C-speed replaces and one pass); the exact one, which
        # knows where each break was, only when a base64 variant shows up.
        if base64.any(_unwrapped(text)):
            spans.extend(_wrapped_spans(base64, text))
    if not spans:
        return []
    spans.sort()
    kept = []
    start, neg_end, _, name, encoding = spans[0]
    end = -neg_end
    for next_start, next_neg_end, _, next_name, next_encoding in spans[1:]:
        if next_start >= end:
            kept.append(Hit(start, end, name, encoding))
            start, end, name, encoding = next_start, -next_neg_end, next_name, next_encoding
        elif -next_neg_end > end:  # overlapping: one hit over both, keeping the first hit's name
            end, encoding = -next_neg_end, "base64-part"
    kept.append(Hit(start, end, name, encoding))
    return kept


# A line break between two base64 characters, as MIME (76 columns) and PEM (64)
# wrap: raw, or JSON-escaped once (base64 inside a JSON text held as a string).
_LINE_BREAK = re.compile(r"(?<=[A-Za-z0-9+/_-])(?:\r?\n|(?:\\r)?\\n)(?=[A-Za-z0-9+/_-])")


def _wrapped_spans(automaton: Matcher[Variant], text: str) -> list[_Span]:
    """Base64 variants that a line break splits: found in the text with the
    breaks between base64 characters taken out, at any width and alignment,
    and reported at their span in ``text`` (the breaks inside included)."""
    joined_at: list[int] = []  # where each break was, as an index into the joined text
    removed: list[int] = []  # characters taken out up to and including each break
    pieces: list[str] = []
    last = 0
    for match in _LINE_BREAK.finditer(text):
        pieces.append(text[last : match.start()])
        joined_at.append(match.start() - (removed[-1] if removed else 0))
        removed.append((removed[-1] if removed else 0) + match.end() - match.start())
        last = match.end()
    if not joined_at:
        return []
    pieces.append(text[last:])
    joined = "".join(pieces)

    def original(index: int) -> int:  # a joined text index -> the same character's index in text
        before = bisect_right(joined_at, index)
        return index + (removed[before - 1] if before else 0)

    spans: list[_Span] = []
    for found_at, found_end, variant in automaton.find(joined):
        if variant.encoding not in _BASE64_ENCODINGS:
            continue  # other variants hold no line breaks: the plain pass found them
        start, end = found_at, found_end
        if variant.encoding == "base64-part":
            start, end = _widen_base64(joined, start, end, variant)
        crossed = bisect_right(joined_at, start)
        if crossed == len(joined_at) or joined_at[crossed] >= end:
            continue  # on one line: the plain pass found it
        spans.append((original(start), -original(end - 1) - 1, True, variant.name, _WRAPPED))
    return spans


def _widen_base64(text: str, start: int, end: int, variant: Variant) -> tuple[int, int]:
    """A base64 core leaves a character on either side that mixes the secret's
    bits with its neighbours' (as its alignment says); take them too, with any
    padding that follows."""
    if variant.lead and start > 0 and text[start - 1] in _B64_ALPHABET and text[start - 1] != "=":
        start -= 1
    if variant.trail and end < len(text) and text[end] in _B64_ALPHABET and text[end] != "=":
        end += 1
    while end < len(text) and text[end] == "=":
        end += 1
    return start, end
