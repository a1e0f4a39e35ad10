"""The scrubber's built-in steps, and ``Found``, where every step reports what it replaced.

A *step* is a callable ``step(text, found) -> value`` applied to every string
(dict keys included) of a checkpoint field. It reports what it replaced with
``found.add(rule)``; :class:`Found` knows the path and the policy, and under
``raise`` refuses the save. A step that writes markers returns a
``ScrubbedText`` recording where they are, so the next step never matches them
again and a load can resolve exactly those. A step may offer
``might_match(text)``, a cheap look at a field's JSON text (False: it would
replace nothing there).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from safepoint import codec
from safepoint.errors import SecretLeak
from safepoint.refs import ScrubbedText, SecretRef, Span

from .known import Secrets, marker
from .known_automaton import Hit, find_known

if TYPE_CHECKING:
    from .engine.scanner import RuleScanner


class Found:
    """Where a step reports a replacement: records ``(rule, path)`` or, under
    the ``raise`` policy, refuses the save naming them."""

    __slots__ = ("as_key", "counts", "names", "parts", "policy")

    def __init__(self, policy: str, root: str) -> None:
        self.policy = policy
        self.counts: Counter[tuple[str, str]] = Counter()
        self.parts: list[str | int] = [root]
        self.as_key = False  # the text being scrubbed is a dict key or a label: it must stay a str
        self.names: list[str] | None = None  # set while the scrubber records a result for its cache

    def path(self) -> str:
        """Where the walk is, as error paths show it: keys (already scrubbed) with
        control characters escaped, a long key as ``[<long key>]``, a long path
        cut in the middle — a key can be megabytes of text."""
        segments = [str(self.parts[0])]
        for part in self.parts[1:]:
            if isinstance(part, int):
                segments.append(f"[{part}]")
            elif len(part) > codec.MAX_KEY_CHARS:
                segments.append("[<long key>]")
            else:
                segments.append(codec.key_segment(part, 0))
        return codec.join_path(segments)

    def add(self, rule: str, count: int = 1) -> None:
        if self.names is not None:
            self.names.extend([rule] * count)
        path = self.path()
        if self.policy == "raise":
            raise SecretLeak(path, rule)
        self.counts[(rule, path)] += count


class Step(Protocol):
    def __call__(self, text: str, found: Found) -> Any: ...


class KnownSecretsStep:
    """Registered secret values, in every encoding, via one automaton."""

    def __init__(self, secrets: Secrets) -> None:
        self.secrets = secrets

    def might_match(self, text: str) -> bool:
        automaton = self.secrets.prefilter()
        return automaton is not None and automaton.any(text)

    def __call__(self, text: str, found: Found) -> Any:
        hits = find_known(self.secrets.automaton(), text)
        if not hits:
            return text
        kept = marks_of(text)
        if kept:  # a secret never hides inside a marker written earlier; skip look-alike overlaps
            hits = outside(hits, kept)
            if not hits:
                return text
        for hit in hits:
            found.add(f"secret:{hit.name}")
        reference = found.policy == "reference"
        whole = hits[0]
        is_whole = len(hits) == 1 and whole.encoding == "raw" and whole.start == 0 and whole.end == len(text)
        if reference and is_whole and not found.as_key:
            return SecretRef(whole.name)
        replacements = [
            (hit.start, hit.end, marker(hit.name, hit.encoding) if reference else f"[REDACTED:{hit.name}]")
            for hit in hits
        ]
        return splice(text, replacements)


class RulesStep:
    """Well-known token formats (and opt-in PII) from the rule table."""

    def __init__(self, scanner: RuleScanner) -> None:
        self.scanner = scanner

    def might_match(self, text: str) -> bool:
        # The scanner's own prefilter: exact-case prefixes and key spellings,
        # valid on a field's JSON text too (triggers holding a backslash are
        # looked for in their JSON-escaped form as well).
        return self.scanner.might_match(text)

    def __call__(self, text: str, found: Found) -> Any:
        # The markers earlier steps wrote are kept as they are; marker-shaped
        # text from input is judged like any other text (the engine's view).
        redacted, names, marks = self.scanner.redact(text, marks_of(text))
        if not names:
            return text
        # One add per rule, not per finding: each add builds the path (dense
        # text has tens of thousands of findings).
        for name, count in Counter(names).items():
            found.add(name, count)
        return ScrubbedText(redacted, marks)


def outside(hits: list[Hit], kept: Sequence[Span]) -> list[Hit]:
    """The hits (sorted, disjoint) that overlap none of the sorted ``kept`` spans,
    in one sweep over both."""
    out: list[Hit] = []
    at = 0
    for hit in hits:
        while at < len(kept) and kept[at][1] <= hit.start:
            at += 1
        if at < len(kept) and kept[at][0] < hit.end:
            continue
        out.append(hit)
    return out


def marks_of(text: str) -> tuple[Span, ...]:
    """The spans of the markers the store wrote in ``text`` (none in a plain ``str``)."""
    return text.marks if isinstance(text, ScrubbedText) else ()


def splice(text: str, replacements: list[tuple[int, int, str]]) -> ScrubbedText:
    """``text`` with sorted, disjoint ``(start, end, marker)`` replacements made,
    as scrubbed text whose marks are the new markers and the ones it had."""
    old = marks_of(text)
    pieces: list[str] = []
    marks: list[Span] = []
    last = shift = 0
    at = 0  # next old mark to carry over
    for start, end, mark in replacements:
        while at < len(old) and old[at][0] < start:
            marks.append((old[at][0] + shift, old[at][1] + shift))
            at += 1
        pieces.append(text[last:start])
        new_start = start + shift
        marks.append((new_start, new_start + len(mark)))
        pieces.append(mark)
        shift += len(mark) - (end - start)
        last = end
    marks.extend((start + shift, end + shift) for start, end in old[at:])
    pieces.append(text[last:])
    return ScrubbedText("".join(pieces), marks)
