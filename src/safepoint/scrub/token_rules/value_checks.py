"""The value checks the token rules' validators share: is a candidate a credential, or typed text?

A rule's regex admits a shape; these judge the value it matched. Typed
stand-ins (``changeme``, ``<your-key>``, ``${TOKEN}``, ``********``,
``123456``), code, identifiers, numbers, paths and URLs are turned away by
entropy and character classes. Stand-in words and typed runs are looked for in
a value's first 256 characters only.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter

from safepoint.scrub.automata import Matcher

# Typed stand-ins, looked for in any case. Only long or punctuated ones for generated tokens, where a
# short word such as "todo" turns up by chance in one of a few thousand.
_TYPED_PARTS = ("example", "changeme", "placeholder", "redacted", "your-", "your_", "${", "<", ">", "....")
_PLACEHOLDER_PARTS = (
    *_TYPED_PARTS, "change_me", "change-me", "yourkey", "yourtoken", "yoursecret", "****", "dummy",
    "notreal", "not_real", "not-a-real", "sample", "replace_me", "replaceme", "insert", "fixme", "{{",
    "}}", "$(", "%(", "%s",
)  # fmt: skip
# (No marker text among them: a marker in input never makes a value look typed — the rules judge the
# text as if it were not there, and a value never holds a kept one.)
# Stand-in words and typed runs are looked for in this many leading characters: a person types short
# values, and in a long generated one (judged whole, however long) some five-letter word turns up by
# chance — in a megabyte of base64, "dummy" or "fixme" almost surely does.
_TYPED_LOOK = 256
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
    if not n:
        return 0.0
    # log2(n) - sum(c * log2(c)) / n: for a short value, the counts by str.count and the sum by table
    # lookups, all in C (a Counter and a loop of log2 calls cost several times more).
    if n < len(_XLOG2X):
        total = sum(map(_XLOG2X.__getitem__, map(value.count, set(value))))
    else:
        total = sum(c * math.log2(c) for c in Counter(value).values())
    return math.log2(n) - total / n


# The value checks run once per candidate, and a dense text has many: each is C-level work (one
# automaton pass for the stand-in words, map/filter over str methods), not a Python loop per character.
_TYPED_WORDS: Matcher[bool] = Matcher(dict.fromkeys(_TYPED_PARTS, True))
_PLACEHOLDER_WORDS: Matcher[bool] = Matcher(dict.fromkeys(_PLACEHOLDER_PARTS, True))
_NEXT_BYTE = bytes((i + 1) & 0xFF for i in range(256))
_XLOG2X = [0.0, *(c * math.log2(c) for c in range(1, 4097))]


def is_placeholder(value: str) -> bool:
    """A value a person typed to stand for a secret: changeme, <your-key>, ${X}, ********, 123456…"""
    head = value[:_TYPED_LOOK]
    return _PLACEHOLDER_WORDS.any(head.lower()) or _typed_shape(head)  # (the typed words are among them)


def _is_typed(value: str, low: str) -> bool:
    return _TYPED_WORDS.any(low[:_TYPED_LOOK]) or _typed_shape(value[:_TYPED_LOOK])  # low: lowered head


def _typed_shape(head: str) -> bool:
    if len(set(head)) <= 3 or "xxxxx" in head or "XXXXX" in head or "*****" in head:
        return True
    return _has_ascending_run(head)


def _has_ascending_run(value: str) -> bool:
    """Six characters in a row, each the next code point: 123456, abcdef (typed, not generated)."""
    if value.isascii():
        # Each byte plus one, compared with the next byte: five equal bytes in a row make a run of six.
        data = value.encode("ascii")
        if len(data) < 6:
            return False
        steps = int.from_bytes(data[:-1].translate(_NEXT_BYTE)) ^ int.from_bytes(data[1:])
        return bytes(5) in steps.to_bytes(len(data) - 1)
    run = 1
    for a, b in itertools.pairwise(value):
        run = run + 1 if ord(b) - ord(a) == 1 else 1
        if run >= 6:
            return True
    return False


def looks_random(value: str) -> bool:
    """A prefixed token: not a typed stand-in, and at least 2.5 bits of entropy per character."""
    return not _is_typed(value, value[:_TYPED_LOOK].lower()) and shannon_entropy(value) >= 2.5


def has_mixed_case(value: str) -> bool:
    """Generated keys mix cases at random: upper and lower, and not in CamelCaseWords (unless digits too)."""
    letters = "".join(filter(str.isalpha, value))
    if letters.islower() or letters.isupper() or not letters:
        return False
    return any(map(str.isdigit, value)) or _CAMEL.fullmatch(letters) is None


def looks_like_secret_value(value: str) -> bool:
    """A value assigned to a secret-sounding key that is a real credential, not code or a placeholder."""
    n = len(value)
    if n < 8 or is_placeholder(value):  # no upper bound: a long value is a secret too, redacted whole
        return False
    if "://" in value or value[0] in "$%/.~#@" or value[:4].lower() == "arn:":
        return False  # env references, format strings, paths, URLs, ARNs
    if _NUMERIC.fullmatch(value) or _WORDS.fullmatch(value):
        return False
    has_digit = any(map(str.isdigit, value))
    has_letter = any(map(str.isalpha, value))
    if not has_letter or (not has_digit and (n < 16 or not has_mixed_case(value))):
        return False
    return shannon_entropy(value) >= (3.0 if n >= 16 else 2.5)
