"""The secret rule tables: well-known credential formats, as their providers document them, by family.

Each rule names the format it targets in ``description``. Prefixed tokens are
found by their prefix (exact case: the case is part of the format); secrets
without a prefix (an AWS secret key, a password) only by their context — a key
name such as ``aws_secret_access_key`` or ``password`` followed by ``=``/``:``.
Values that a rule's shape admits but that are not credentials — placeholders
(``changeme``, ``${TOKEN}``, ``<your-key>``, ``********``), code
(``os.environ["X"]``), identifiers, numbers, paths, URLs — are turned away by
the value checks of :mod:`.value_checks` (entropy, character classes).

One module per family, each a ``RULES`` tuple: ``formats`` (PEM, JWT),
``aws``, ``code_hosting``, ``ai_providers``, ``saas``, ``registries``, and
``context`` (URL passwords, authorization headers, assignments). They are
joined in :mod:`safepoint.scrub.rules`, in that order. Order matters only on a
tie: on overlapping matches the longer wins, then the rule listed first, so
specific formats come before the generic ones.
"""
