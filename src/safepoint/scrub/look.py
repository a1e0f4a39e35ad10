"""The scrubber's look: one pass over a value's canonical JSON bytes that says whether it must be walked.

A value is walked string by string (:mod:`.walk`) only when its canonical JSON
(which the store encodes anyway) might hold something to replace: a registered
secret in any encoding, a rule trigger (and the JSON-escaped form of one
holding a backslash), or a *stored shape* — a ``$`` key to escape, a
reference the store wrote, a marker from a load. Every one of these is a
literal, so all of them go into one Aho-Corasick automaton that runs over the
bytes as encoded: no decode to ``str``, one pass over each byte instead of a
regex and one prefilter per step.

Why bytes give the same verdict as the text: canonical JSON is UTF-8, and
UTF-8 is self-synchronising — a valid UTF-8 word occurs in valid UTF-8 bytes
exactly where its text occurs in the decoded text. Every word is a ``str``
encoded to UTF-8, so a byte match is a text match and back.

A step the store did not build (the user's own) is asked through its
``might_match(text)`` on the decoded text, after the automaton said no; one
without ``might_match`` makes every value walk, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ahocorasick_rs import BytesAhoCorasick, Implementation

if TYPE_CHECKING:
    from .engine.scanner import RuleScanner
    from .known import Secrets
    from .walk import Step

# A ``$`` key (or a string beginning with ``$``) — to escape, or a reference the store wrote — and the
# markers scrubbed text holds: a value showing one is walked even when no step matches.
STORED_SHAPES = ('"$', "[SECRET:", "[REDACTED:")
# Bytes the first call looks at: the automaton lists every match, so a text dense with words is
# looked at in growing pieces and the first piece with a match answers (see ByteWords.any).
_FIRST_LOOK = 1 << 13


class ByteWords:
    """Whether any of many literal words occurs in some bytes: one automaton pass."""

    def __init__(self, words: Sequence[str]) -> None:
        encoded = sorted({word.encode() for word in words if word})
        self._reach = max(map(len, encoded), default=1) - 1
        # The DFA is the fastest to search and small enough for a few thousand words.
        self._automaton = BytesAhoCorasick(encoded, implementation=Implementation.DFA) if encoded else None

    def any(self, data: bytes | memoryview) -> bool:
        """Whether a word occurs in ``data``: the first 8 KB, then 16 times more each time,
        overlapping by ``longest - 1`` so a word across a cut is seen — a clean text costs one
        pass (a handful of calls), a dense one almost nothing."""
        automaton = self._automaton
        if automaton is None:
            return False
        size = len(data)
        if size <= _FIRST_LOOK:
            return bool(automaton.find_matches_as_indexes(data))
        view, cut, piece = memoryview(data), 0, _FIRST_LOOK
        while cut < size:
            if automaton.find_matches_as_indexes(view[cut : cut + piece + self._reach]):
                return True
            cut += piece
            piece *= 16
        return False


class Look:
    """The look for one scrubber: its registered secrets, its rules (None: no rule step) and the
    user's own steps, in one automaton rebuilt when the registered secrets change."""

    def __init__(self, secrets: Secrets, rules: RuleScanner | None, others: Sequence[Step]) -> None:
        self._secrets = secrets
        self._rules = rules
        self._others = tuple(others)
        self._lock = threading.Lock()
        # (secrets version, the automaton — None when some rule has no trigger: every value walks)
        self._built: tuple[int, ByteWords | None] | None = None

    def __call__(self, data: bytes | memoryview) -> bool:
        """Whether a value whose canonical JSON is ``data`` must be walked."""
        words = self._words()
        if words is None or words.any(data):
            return True
        if self._others:
            text = bytes(data).decode()
            for step in self._others:
                check = getattr(step, "might_match", None)
                if check is None or check(text):
                    return True
        return False

    def _words(self) -> ByteWords | None:
        built = self._built
        if built is not None and built[0] == self._secrets.version:
            return built[1]
        with self._lock:
            version, words = self._secrets.look_words()
            rule_words = () if self._rules is None else self._rules.look_words()
            automaton = None if rule_words is None else ByteWords([*STORED_SHAPES, *rule_words, *words])
            self._built = (version, automaton)
            return automaton
