"""What a rule table is written in: a :class:`Rule` is data, a :class:`Finding` what it matched.

A rule has a name, a regex for one occurrence, and *triggers* — literal
substrings one of which lies inside every match (see
:mod:`safepoint.scrub.engine.scanner` for how they are run).

Trigger case: ``Rule.triggers`` are lowercase, so any prefilter may lower the
text and look for them. The scanner itself does not lower the text (a copy of
every string, and a slow one for non-ASCII text): it looks for exact
*spellings*. A rule with ``spellings`` (the token prefixes, whose case is part
of the documented format, e.g. ``AIza``) is looked for in exactly those; a rule
without is looked for in each trigger's lower, UPPER, Capitalized, Title_Case,
camelCase and PascalCase spellings (``api_key``: ``API_KEY``, ``apiKey``,
``ApiKey`` …), which covers how key names are written. A key in an odd mixed
case such as ``PaSsWoRd`` is not seen.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

Span = tuple[int, int]


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
    max_length: int | None = 256  # longest match, from its start (bounds what the regex sees); None: any
    # A match the rule refuses (``secret`` group absent or empty, or ``validate`` saying no) still
    # covers its span: no trigger inside it is tried again. For unbounded values, whose later triggers
    # would each judge a suffix of the same value again (quadratic); the pattern should then match,
    # without a ``secret`` group, wherever it would otherwise fail after reading a value.
    covers_refused: bool = False


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
