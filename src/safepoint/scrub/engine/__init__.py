"""The rule engine: finds the spans a set of rules matches, in linear time; it knows no rule.

``rule`` is the data a table is written in (:class:`~.rule.Rule`), ``scanner``
runs a set of rules over text (find, redact) with the linear-time scan at each
rule's literal triggers, and ``marks`` the arithmetic of the markers the store
wrote and of marker-shaped input. The tables live in
:mod:`safepoint.scrub.token_rules` and :mod:`safepoint.scrub.pii`; the set
the scrubber runs is assembled in :mod:`safepoint.scrub.rules`.
"""
