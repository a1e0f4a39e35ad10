"""The scrubber: registered secrets, token rules and opt-in PII, removed before any byte is written.

``Secrets`` holds the values a harness must never store; ``Scrubber``
(``scrubber.py``, with its built-in steps and ``Found``, where a step reports
what it replaced) is the list of plain callables a store runs on every
checkpoint, and ``walk.py`` the walk over each value; the rule engine lives
in ``engine``, its tables in ``token_rules`` and ``pii``, and ``rules`` joins
them. See docs/secrets.md.
"""

from __future__ import annotations

from .known import Secrets
from .scrubber import POLICIES, Found, KnownSecretsStep, Policy, RulesStep, Scrubber
from .walk import Step

__all__ = ["POLICIES", "Found", "KnownSecretsStep", "Policy", "RulesStep", "Scrubber", "Secrets", "Step"]
