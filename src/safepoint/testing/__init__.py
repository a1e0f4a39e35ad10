"""Shipped test kits: ``crash`` (SIGKILL your agent and check it resumes exactly),
``conformance`` (the suite every store backend passes) and ``migrations`` (fixtures and
checks for your migration chain)."""
