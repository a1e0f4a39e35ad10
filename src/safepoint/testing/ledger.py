"""Deprecated path: the side-effect ledger is now ``safepoint.testing.crash.Ledger``.

Importing this module warns (``DeprecationWarning``) and gives the same objects as before.
"""

from __future__ import annotations

import warnings

from safepoint.testing.crash import DuplicateEffect, Effect, Ledger

warnings.warn(
    "safepoint.testing.ledger moved to safepoint.testing.crash; import Ledger from there",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["DuplicateEffect", "Effect", "Ledger"]
