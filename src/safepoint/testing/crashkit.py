"""Deprecated path: the crash kit's mechanisms are now in ``safepoint.testing.crash``.

Importing this module warns (``DeprecationWarning``) and gives the same objects
as before; ``CrashReport`` here is ``safepoint.testing.crash.LoopReport``, what
``crash_loop`` returns.
"""

from __future__ import annotations

import warnings

from safepoint.testing.crash import (
    STATEMENTS_PER_SAVE,
    AgentProcess,
    AgentSpec,
    ChildSpec,
    CrashCheckFailed,
    Outcome,
    Spawn,
    StatementKiller,
    check_journal,
    crash_loop,
    kill_after,
    kill_at_boundary,
    kill_in_save,
    load_head,
    read_journal,
    resume,
    statement_label,
    verify_history,
)
from safepoint.testing.crash import LoopReport as CrashReport

warnings.warn(
    "safepoint.testing.crashkit moved to safepoint.testing.crash (CrashReport is now LoopReport); "
    "import from there",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "STATEMENTS_PER_SAVE",
    "AgentProcess",
    "AgentSpec",
    "ChildSpec",
    "CrashCheckFailed",
    "CrashReport",
    "Outcome",
    "Spawn",
    "StatementKiller",
    "check_journal",
    "crash_loop",
    "kill_after",
    "kill_at_boundary",
    "kill_in_save",
    "load_head",
    "read_journal",
    "resume",
    "statement_label",
    "verify_history",
]
