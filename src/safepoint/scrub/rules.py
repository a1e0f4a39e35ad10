"""The rule set the scrubber runs: the secret rule tables in order, the chosen PII kinds, one scanner.

The engine (:mod:`safepoint.scrub.engine`) knows no rule; the tables
(:mod:`safepoint.scrub.token_rules`, by vendor family, and
:mod:`safepoint.scrub.pii`) know no engine beyond the :class:`Rule` type.
This module joins them: importing it compiles every table, so the scrubber
imports it only when a store scrubs with rules.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from safepoint.errors import InvalidArgument

from .engine.rule import Rule
from .engine.scanner import RuleScanner
from .pii import PII_KINDS, PII_RULES
from .token_rules import ai_providers, aws, code_hosting, context, formats, registries, saas

# Specific formats before the generic, context-found ones: on a tie the rule listed first names the
# finding (see token_rules).
SECRET_RULES: tuple[Rule, ...] = (
    *formats.RULES,
    *aws.RULES,
    *code_hosting.RULES,
    *ai_providers.RULES,
    *saas.RULES,
    *registries.RULES,
    *context.RULES,
)


def pii_rules(kinds: Iterable[str]) -> tuple[Rule, ...]:
    """The rules for the given PII kinds, in table order; an unknown kind is an error."""
    wanted = set(kinds)
    unknown = sorted(wanted - set(PII_KINDS))
    if unknown:
        raise InvalidArgument(f"unknown PII kind; known kinds: {', '.join(PII_KINDS)}")
    return tuple(rule for rule in PII_RULES if rule.kind in wanted)


def rules_named(names: Iterable[str]) -> tuple[Rule, ...]:
    """The secret rules with these names, in table order (``safepoint redact --rule``); an
    unknown name is an error that lists the known ones (rule names are no secret)."""
    wanted = set(names)
    known = {rule.name for rule in SECRET_RULES}
    if wanted - known:
        raise InvalidArgument(f"unknown scrubber rule; known rules: {', '.join(sorted(known))}")
    return tuple(rule for rule in SECRET_RULES if rule.name in wanted)


def default_scanner(pii: Iterable[str] = ()) -> RuleScanner:
    """The secret rules plus the chosen PII kinds; built once per distinct set of kinds."""
    kinds = frozenset(pii)
    pii_rules(kinds)  # validates the kinds before anything is cached
    return _scanner_for(kinds)


@functools.lru_cache(maxsize=64)
def _scanner_for(kinds: frozenset[str]) -> RuleScanner:
    return RuleScanner((*SECRET_RULES, *pii_rules(kinds)))
