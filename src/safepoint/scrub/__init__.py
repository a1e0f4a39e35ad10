"""The scrubber: registered secrets, token rules and opt-in PII, removed before any byte is written.

``Secrets`` holds the values a harness must never store; ``Scrubber`` is the
pipeline (a list of plain callables) a store runs on every checkpoint; the
rule table lives in ``rules``/``token_rules``/``pii``. See docs/secrets.md.
"""

from __future__ import annotations

from .known import Secrets
from .pipeline import POLICIES, Found, KnownSecretsStep, Policy, RulesStep, Scrubber, Step

__all__ = ["POLICIES", "Found", "KnownSecretsStep", "Policy", "RulesStep", "Scrubber", "Secrets", "Step"]
