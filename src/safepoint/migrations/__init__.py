"""The application-state migration chain: pure ``dict -> dict`` functions, no I/O.

Import from here: ``MigrationChain`` (``chain``: what is registered and which
versions load; the whole story is in its module's docstring) and
``current_version``. ``lifting`` runs the functions on one checkpoint and
checks what each returns.
"""

from __future__ import annotations

from .chain import MigrationChain, current_version
from .lifting import Migration

__all__ = ["Migration", "MigrationChain", "current_version"]
