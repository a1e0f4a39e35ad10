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
from collections.abc import Mapping
from typing import Generic, TypeVar

from ahocorasick_rs import AhoCorasick, Implementation

V = TypeVar("V")


class Matcher(Generic[V]):
    """Finds every occurrence of the ``words`` (each mapped to a value) in a text."""

    def __init__(self, words: Mapping[str, V]) -> None:
        patterns = [word for word in words if word]
        self._values = [words[word] for word in patterns]
        # The DFA is the fastest to search and small enough for a few thousand patterns.
        self._automaton = AhoCorasick(patterns, implementation=Implementation.DFA) if patterns else None

    def __len__(self) -> int:
        return len(self._values)

    def any(self, text: str) -> bool:
        """Whether any word occurs in ``text``."""
        automaton = self._automaton
        if automaton is None:
            return False
        try:
            return bool(automaton.find_matches_as_indexes(text))
        except UnicodeEncodeError:
            return bool(automaton.find_matches_as_indexes(_without_surrogates(text)))

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


_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (which UTF-8 cannot hold) as U+FFFD: one
    character for one, so offsets stay valid; no pattern contains either."""
    return _SURROGATE.sub("\ufffd", text)
