"""The scrubber: registered secrets, token rules and opt-in PII, removed before any byte is written.

``Secrets`` holds the values a harness must never store; ``Scrubber`` is the
pipeline (a list of plain callables) a store runs on every checkpoint; the
rule engine lives in ``engine``, its tables in ``token_rules`` and ``pii``,
and ``rules`` joins them. See docs/secrets.md.
"""

from __future__ import annotations

from .known import Secrets
from .pipeline import POLICIES, Policy, Scrubber
from .steps import Found, KnownSecretsStep, RulesStep, Step

__all__ = ["POLICIES", "Found", "KnownSecretsStep", "Policy", "RulesStep", "Scrubber", "Secrets", "Step"]
