"""Many literal strings found in one pass over a text (Aho-Corasick, via ahocorasick-rs).

Both passes of the scrubber rest on this: the registered-secret variants and
the rule triggers each become one ``Matcher``, so a scan costs one pass
whatever the number of patterns. ahocorasick-rs (a binding of Rust's
aho-corasick crate, which ships wheels) scans str in C-like time — about
three times pyahocorasick's pace on this machine — and reports Python
character offsets.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Generic, TypeVar

from ahocorasick_rs import AhoCorasick, Implementation

V = TypeVar("V")


class Matcher(Generic[V]):
    """Finds every occurrence of the ``words`` (each mapped to a value) in a text."""

    def __init__(self, words: Mapping[str, V]) -> None:
        patterns = [word for word in words if word]
        self._values = [words[word] for word in patterns]
        self._longest = max(map(len, patterns), default=0)
        # The DFA is the fastest to search and small enough for a few thousand patterns.
        self._automaton = AhoCorasick(patterns, implementation=Implementation.DFA) if patterns else None

    def __len__(self) -> int:
        return len(self._values)

    def any(self, text: str) -> bool:
        """Whether any word occurs in ``text``.

        The automaton lists every match, so a text dense with words (a trigger every few
        characters over megabytes) is looked at in growing pieces — 4 KB, then 16 times more each
        time, overlapping by ``longest - 1`` — and the first piece with a match answers: a clean
        text still costs one pass (in a handful of calls), a dense one almost nothing.
        """
        automaton = self._automaton
        if automaton is None:
            return False
        size, cut, piece, reach = len(text), 0, _FIRST_LOOK, self._longest - 1
        while cut < size:
            part = text[cut : cut + piece + reach] if cut or piece < size else text
            try:
                if automaton.find_matches_as_indexes(part):
                    return True
            except UnicodeEncodeError:
                if automaton.find_matches_as_indexes(_without_surrogates(part)):
                    return True
            cut += piece
            piece *= 16
        return False

    def find(self, text: str) -> list[tuple[int, int, V]]:
        """Every occurrence, overlapping ones included: ``(start, end, value)``, by end offset."""
        automaton = self._automaton
        if automaton is None:
            return []
        values = self._values
        try:
            found = automaton.find_matches_as_indexes(text, overlapping=True)
        except UnicodeEncodeError:
            found = automaton.find_matches_as_indexes(_without_surrogates(text), overlapping=True)
        return [(start, end, values[index]) for index, start, end in found]

    def find_within(self, text: str, spans: Sequence[tuple[int, int]]) -> Iterator[tuple[int, int, V]]:
        """Every occurrence that starts inside one of the sorted, disjoint ``spans``,
        as ``(start, end, value)`` in order of start.

        The text is searched a chunk at a time, so a dense text (a trigger every
        few characters over megabytes) never holds all its occurrences in memory
        at once; each chunk reaches ``longest - 1`` characters past its end so an
        occurrence across the cut is found, once, in the chunk where it starts.
        """
        automaton = self._automaton
        if automaton is None:
            return
        values, reach, size = self._values, self._longest - 1, _CHUNK
        by_start = itemgetter(1)
        for lo, hi in spans:
            for cut in range(lo, hi, size):
                stop = min(cut + size, hi)
                piece = text[cut : stop + reach]
                try:
                    found = automaton.find_matches_as_indexes(piece, overlapping=True)
                except UnicodeEncodeError:
                    found = automaton.find_matches_as_indexes(_without_surrogates(piece), overlapping=True)
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
