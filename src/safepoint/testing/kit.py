"""Deprecated path: the crash-test kit is now ``safepoint.testing.crash``.

Importing this module warns (``DeprecationWarning``) and gives the same objects
as before; the pytest fixture is ``safepoint.testing.crash.plugin``.
"""

from __future__ import annotations

import contextlib
import warnings

from safepoint.testing.crash import (
    COMPARED,
    CrashCheckFailed,
    CrashKit,
    CrashReport,
    Ending,
    EntrySpec,
    Ledger,
    crash_test,
    kill_after_effect,
)

warnings.warn(
    "safepoint.testing.kit moved to safepoint.testing.crash (the pytest fixture to "
    "safepoint.testing.crash.plugin); import from there",
    DeprecationWarning,
    stacklevel=2,
)

# `pytest_plugins = ["safepoint.testing.kit"]` keeps finding the fixture; without pytest the
# kit works, only the fixture is missing (as before).
with contextlib.suppress(ImportError):
    from safepoint.testing.crash.plugin import crash_kit  # noqa: F401

__all__ = [
    "COMPARED",
    "CrashCheckFailed",
    "CrashKit",
    "CrashReport",
    "Ending",
    "EntrySpec",
    "Ledger",
    "crash_test",
    "kill_after_effect",
]
