"""The rule engine: find well-known token formats (and opt-in PII) in text, fast.

A :class:`Rule` is data: a name, a regex for one occurrence, and *triggers* —
literal substrings one of which lies inside every match. :class:`RuleScanner`
puts every trigger of every rule into one Aho-Corasick automaton, so text with
no trigger costs one pass in C. Only where a trigger is found does a rule's
regex run, anchored at the trigger (``pattern.match`` there) or, for rules
whose match may begin before the trigger, ``pattern.search`` over a window of
``reach_before`` characters before it and ``max_length`` after — never the
whole table over the whole text.

Trigger case: ``Rule.triggers`` are lowercase, so any prefilter may lower the
text and look for them. The scanner itself does not lower the text (a copy of
every string, and a slow one for non-ASCII text): it looks for exact
*spellings*. A rule with ``spellings`` (the token prefixes, whose case is part
of the documented format, e.g. ``AIza``) is looked for in exactly those; a rule
without is looked for in each trigger's lower, UPPER, Capitalized, Title_Case,
camelCase and PascalCase spellings (``api_key``: ``API_KEY``, ``apiKey``,
``ApiKey`` …), which covers how key names are written. A key in an odd mixed
case such as ``PaSsWoRd`` is not seen.

Markers are never matched again: a finding that overlaps ``[REDACTED:…]`` or a
registered secret's ``[SECRET:…]`` is dropped, so redaction is idempotent.
The engine never logs and never puts matched text in an exception.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from safepoint.errors import InvalidArgument

from .matcher import Matcher

if TYPE_CHECKING:
    from safepoint.scrub.token_rules import SECRET_RULES  # noqa: F401  (see __getattr__ below)

PII_KINDS: tuple[str, ...] = ("email", "phone", "card", "iban", "ssn")
_MARKER = re.compile(r"\[(?:REDACTED|SECRET):[^\]\s]{1,160}\]")
_RULE_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")  # so that every marker is recognised as one
_MAX_ROUNDS = 32


@dataclass(frozen=True, slots=True)
class Rule:
    """One detectable format; see the module docstring for how it is run."""

    name: str  # appears in the marker [REDACTED:<name>]
    pattern: re.Pattern[str]  # one occurrence; group "secret", if any, is all that is redacted
    triggers: tuple[str, ...]  # lowercase literals, one inside every match; () = regex over the whole text
    kind: str = "secret"  # "secret" or a PII kind
    validate: Callable[[str], bool] | None = None  # extra check on the redacted value
    description: str = ""  # the documented format it targets, in one line
    spellings: tuple[str, ...] = ()  # exact-case trigger spellings; () = the usual case variants
    reach_before: int = 0  # how far before a trigger a match may begin (0: it begins at the trigger)
    max_length: int = 256  # longest match, from its start; bounds the window the regex sees


@dataclass(frozen=True, slots=True)
class Finding:
    """A span of text a rule matched (the part to redact)."""

    start: int
    end: int
    rule: str


def case_variants(trigger: str) -> set[str]:
    """The spellings a lowercase key-name trigger is looked for in."""
    parts = re.split(r"[_\-]", trigger)
    camel = parts[0] + "".join(p.capitalize() for p in parts[1:])
    return {
        trigger,
        trigger.upper(),
        trigger.capitalize(),
        trigger.title(),
        camel,
        camel[:1].upper() + camel[1:],
    }


# One probe per (rule, spelling): what to run when the spelling is found.
# (rule index, spelling length, reach_before, window, bound match/search, has "secret" group, validate)
_Probe = tuple[int, int, int, int, Callable[..., re.Match[str] | None], bool, Callable[[str], bool] | None]


class RuleScanner:
    """Runs a set of rules over text: :meth:`find` the spans, :meth:`redact` them."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        names = [rule.name for rule in self.rules]
        if len(set(names)) != len(names):
            raise InvalidArgument("rule names must be unique")
        for name in names:
            if not _RULE_NAME.fullmatch(name):
                raise InvalidArgument(f"rule name {name!r} must be 1-128 of A-Z a-z 0-9 _ . -")
        probes: dict[str, list[_Probe]] = {}
        self._whole_text: list[tuple[int, re.Pattern[str], bool, Callable[[str], bool] | None]] = []
        for index, rule in enumerate(self.rules):
            has_group = "secret" in rule.pattern.groupindex
            if not rule.triggers and not rule.spellings:
                self._whole_text.append((index, rule.pattern, has_group, rule.validate))
                continue
            spellings = set(rule.spellings) or {v for t in rule.triggers for v in case_variants(t)}
            method = rule.pattern.search if rule.reach_before else rule.pattern.match
            window = rule.reach_before + rule.max_length + 1  # +1: boundary lookaheads see the next char
            for spelling in sorted(spellings):
                probe = (index, len(spelling), rule.reach_before, window, method, has_group, rule.validate)
                probes.setdefault(spelling, []).append(probe)
        self._automaton = Matcher({spelling: tuple(found) for spelling, found in probes.items()})

    def might_match(self, text: str) -> bool:
        """Cheap prefilter: False means :meth:`find` would certainly return nothing."""
        if self._whole_text:
            return True
        return self._automaton.any(text)

    def find(self, text: str) -> list[Finding]:
        """Non-overlapping findings sorted by start; on overlap the longer, then earlier-listed, wins."""
        candidates = self._candidates(text)
        if not candidates:
            return []
        if "[REDACTED:" in text or "[SECRET:" in text:
            candidates = _outside_markers(text, candidates)
        if len(candidates) > 1:
            candidates = _resolve_overlaps(candidates)
        return [Finding(start, end, self.rules[index].name) for start, end, index in candidates]

    def redact(self, text: str) -> tuple[str, list[str]]:
        """``text`` with each finding replaced by ``[REDACTED:<rule>]``, and the rule names hit.

        When nothing is found, the very same ``str`` object comes back with ``[]``. A token glued to
        one just redacted (``-----END … KEY-----sk-ant-…``) only shows its boundary once its
        neighbour is a marker, so redaction repeats until nothing more is found: redacting the
        result again is always a no-op.
        """
        names: list[str] = []
        for _ in range(_MAX_ROUNDS):  # each round turns unmarked text into markers, which never match
            findings = self.find(text)
            if not findings:
                break
            pieces: list[str] = []
            last = 0
            for finding in findings:
                pieces.append(text[last : finding.start])
                pieces.append(f"[REDACTED:{finding.rule}]")
                last = finding.end
            pieces.append(text[last:])
            text = "".join(pieces)
            names.extend(finding.rule for finding in findings)
        return text, names

    def _candidates(self, text: str) -> list[tuple[int, int, int]]:
        found: list[tuple[int, int, int]] = []
        if len(self._automaton):
            # Per rule, where its last match ended: a trigger inside that match needs no second look.
            reached: dict[int, int] = {}
            for at, _end, probes in self._automaton.find(text):
                for index, _length, before, window, run, has_group, validate in probes:
                    if at < reached.get(index, 0):
                        continue
                    lo = at - before if at > before else 0
                    match = run(text, lo, lo + window)
                    while match is not None:
                        span = match.span("secret") if has_group else match.span()
                        if span[1] > span[0] and (validate is None or validate(text[span[0] : span[1]])):
                            found.append((span[0], span[1], index))
                            reached[index] = match.end()
                            break
                        if not before:  # anchored at the trigger: one try
                            break
                        match = run(text, match.start() + 1, lo + window)
        for index, pattern, has_group, validate in self._whole_text:
            for match in pattern.finditer(text):
                start, end = match.span("secret") if has_group else match.span()
                if end > start and (validate is None or validate(text[start:end])):
                    found.append((start, end, index))
        return found


def _outside_markers(text: str, candidates: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Drop candidates overlapping a marker: what was redacted stays as it is."""
    markers = [m.span() for m in _MARKER.finditer(text)]
    if not markers:
        return candidates
    return [c for c in candidates if not any(c[0] < m_end and m_start < c[1] for m_start, m_end in markers)]


def _resolve_overlaps(candidates: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Keep the longest (then earliest-listed rule, then leftmost) of overlapping candidates."""
    kept: list[tuple[int, int, int]] = []
    for cand in sorted(set(candidates), key=lambda c: (c[0] - c[1], c[2], c[0])):
        if all(cand[1] <= k[0] or k[1] <= cand[0] for k in kept):
            kept.append(cand)
    kept.sort()
    return kept


# -- value checks shared by the validators ---------------------------------------

# Typed stand-ins, looked for in any case. Only long or punctuated ones for generated tokens, where a
# short word such as "todo" turns up by chance in one of a few thousand.
_TYPED_PARTS = ("example", "changeme", "placeholder", "redacted", "your-", "your_", "${", "<", ">", "....")
_PLACEHOLDER_PARTS = (
    *_TYPED_PARTS, "change_me", "change-me", "yourkey", "yourtoken", "yoursecret", "****", "dummy",
    "notreal", "not_real", "not-a-real", "sample", "replace_me", "replaceme", "insert", "fixme", "{{",
    "}}", "$(", "%(", "%s", "[secret:",
)  # fmt: skip
_NUMERIC = re.compile(r"[\d\s.:/+TZ-]+")  # numbers, amounts, dates, times
# Words (lower, Capitalized, camelCase or UPPER) with small numbers, joined by separators:
# my_db_pass, read-only, user1.password, hunter22, settings.DB_PASSWORD, rfc6750. Random mixed case
# ("xLMboGuEsBO14") is not made of words.
_WORD = r"(?:[A-Z]?[a-z]+(?:[A-Z][a-z]+)*\d{0,4}|[A-Z]+\d{0,4}|\d+)"
_WORDS = re.compile(_WORD + r"(?:[_.\-/:]" + _WORD + ")*")
_CAMEL = re.compile(r"[a-z]*(?:[A-Z][a-z]+)*")


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value``'s own character distribution."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


def is_placeholder(value: str) -> bool:
    """A value a person typed to stand for a secret: changeme, <your-key>, ${X}, ********, 123456…"""
    low = value.lower()
    return any(part in low for part in _PLACEHOLDER_PARTS) or _is_typed(value, low)


def _is_typed(value: str, low: str) -> bool:
    if any(part in low for part in _TYPED_PARTS) or len(set(value)) <= 3:
        return True
    if "xxxxx" in value or "XXXXX" in value or "*****" in value:
        return True
    run = longest = 1
    for a, b in itertools.pairwise(value):  # 123456, abcdef: typed, not generated
        run = run + 1 if ord(b) - ord(a) == 1 else 1
        longest = max(longest, run)
    return longest >= 6


def looks_random(value: str) -> bool:
    """A prefixed token: not a typed stand-in, and at least 2.5 bits of entropy per character."""
    return not _is_typed(value, value.lower()) and shannon_entropy(value) >= 2.5


def has_mixed_case(value: str) -> bool:
    """Generated keys mix cases at random: upper and lower, and not in CamelCaseWords (unless digits too)."""
    letters = "".join(c for c in value if c.isalpha())
    if letters.islower() or letters.isupper() or not letters:
        return False
    return any(c.isdigit() for c in value) or _CAMEL.fullmatch(letters) is None


def looks_like_secret_value(value: str) -> bool:
    """A value assigned to a secret-sounding key that is a real credential, not code or a placeholder."""
    n = len(value)
    if n < 8 or n > 256 or is_placeholder(value):
        return False
    if "://" in value or value[0] in "$%/.~#@" or value[:4].lower() == "arn:":
        return False  # env references, format strings, paths, URLs, ARNs
    if _NUMERIC.fullmatch(value) or _WORDS.fullmatch(value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_letter = any(c.isalpha() for c in value)
    if not has_letter or (not has_digit and (n < 16 or not has_mixed_case(value))):
        return False
    return shannon_entropy(value) >= (3.0 if n >= 16 else 2.5)


# -- the tables ---------------------------------------------------------------------


def pii_rules(kinds: Iterable[str]) -> tuple[Rule, ...]:
    """The rules for the given PII kinds, in table order; an unknown kind is an error."""
    wanted = set(kinds)
    unknown = sorted(wanted - set(PII_KINDS))
    if unknown:
        raise InvalidArgument(f"unknown PII kind {unknown[0]!r}; known kinds: {', '.join(PII_KINDS)}")
    # pii.py builds Rule objects from this module, so it is imported when first needed.
    from safepoint.scrub.pii import PII_RULES  # noqa: PLC0415

    return tuple(rule for rule in PII_RULES if rule.kind in wanted)


def default_scanner(pii: Iterable[str] = ()) -> RuleScanner:
    """The secret rules plus the chosen PII kinds; built once per distinct set of kinds."""
    kinds = frozenset(pii)
    pii_rules(kinds)  # validates the kinds before anything is cached
    return _scanner_for(kinds)


@functools.lru_cache(maxsize=64)
def _scanner_for(kinds: frozenset[str]) -> RuleScanner:
    from safepoint.scrub.token_rules import SECRET_RULES  # noqa: PLC0415  (the table imports Rule from here)

    return RuleScanner((*SECRET_RULES, *pii_rules(kinds)))


def __getattr__(name: str) -> tuple[Rule, ...]:
    # ``SECRET_RULES`` is re-exported lazily: token_rules imports ``Rule`` from this module.
    if name == "SECRET_RULES":
        from safepoint.scrub.token_rules import SECRET_RULES  # noqa: PLC0415

        return SECRET_RULES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
