"""The pieces the token rule tables are written with: word boundaries, assignments, prefixed tokens.

A token does not continue a word on either side (``TOKEN_START``,
``TOKEN_END``; the ``DASHED_`` pair for formats whose alphabet has ``-``), and
an escaped ``\\n``, ``\\r`` or ``\\t`` before it (text inside a JSON string)
counts as a line break, not as a letter. ``ASSIGN`` is what joins a key to its
value in env files, YAML, JSON (also JSON inside JSON) and code.
"""

from __future__ import annotations

import re

from safepoint.scrub.engine.rule import Rule

from .value_checks import has_mixed_case, looks_random

# A token does not continue a word on either side; an escaped \n, \r or \t before it (text inside a
# JSON string) counts as a line break, not as the letter n.
ESCAPED_BREAK = r"(?<=\\[nrt])"
TOKEN_START = r"(?:(?<![A-Za-z0-9_])|" + ESCAPED_BREAK + ")"
TOKEN_END = r"(?![A-Za-z0-9_])"
# … nor a dashed name, for formats whose alphabet has "-"
DASHED_START = r"(?:(?<![A-Za-z0-9_-])|" + ESCAPED_BREAK + ")"
DASHED_END = r"(?![A-Za-z0-9_-])"
# key="value", key: value, "key": "value", key => value, key := value, \"key\": \"value\" (JSON in
# JSON), \\\"key\\\": \\\"value\\\" (and once more)
ASSIGN_TO_VALUE = (
    r"""(?:\\{0,3}["'])?(?:[ \t]*:[ \t]*(?:str|bytes|SecretStr))?[ \t]{0,4}(?::=|=>|==|[:=])[ \t]{0,4}"""
    r"""\\{0,3}"""
)
ASSIGN = ASSIGN_TO_VALUE + r"""["'`]?"""


def prefixed(
    name: str,
    regex: str,
    prefixes: tuple[str, ...],
    description: str,
    *,
    max_length: int | None = 256,
    strict: bool = False,
) -> Rule:
    """A token found by its documented, case-sensitive prefix."""
    validate = random_with_classes if strict else looks_random
    return Rule(
        name=name,
        pattern=re.compile(regex),
        triggers=tuple(p.lower() for p in prefixes),
        validate=validate,
        description=description,
        spellings=prefixes,
        max_length=max_length,
    )


def random_with_classes(value: str) -> bool:
    """For weak prefixes (``sk-``, ``hf_``, ``npm_``): a generated key mixes cases."""
    return looks_random(value) and has_mixed_case(value)
