"""The crash-test kit: SIGKILL an agent in child processes, resume it in fresh ones, check it
ends exactly like an uninterrupted run (see docs/crash-testing.md).

For your agent: ``crash_test("pkg.mod:run_agent", tmp_path)`` or ``CrashKit`` (``runner.py``
decides where to kill, ``checks.py`` judges what each kill left behind), with ``Ledger``
standing in for the outside world; ``plugin.py`` is the same as a pytest fixture.
For a backend: ``crash_loop`` kills the ``scripted_agent`` (its ``run_agent``) on any store
URL (``loop.py``).
The lower-level pieces — ``AgentProcess``, the ``kill_*`` helpers, ``EntrySpec`` — come
from ``safepoint.crashrig``, which the demo uses too.
"""

from __future__ import annotations

from safepoint.crashrig.child import EntrySpec
from safepoint.crashrig.ledger import DuplicateEffect, Effect, Ledger
from safepoint.crashrig.process import (
    AgentProcess,
    ChildSpec,
    CrashCheckFailed,
    Outcome,
    kill_after,
    kill_after_effect,
    kill_at_boundary,
    kill_in_save,
    resume,
)
from safepoint.crashrig.statements import STATEMENTS_PER_SAVE, StatementKiller, statement_label

from .checks import COMPARED, CrashChecks, CrashReport, Ending
from .loop import (
    AgentSpec,
    LoopReport,
    Spawn,
    check_journal,
    crash_loop,
    load_head,
    read_journal,
    verify_history,
)
from .runner import CrashKit, crash_test

__all__ = [
    "COMPARED",
    "STATEMENTS_PER_SAVE",
    "AgentProcess",
    "AgentSpec",
    "ChildSpec",
    "CrashCheckFailed",
    "CrashChecks",
    "CrashKit",
    "CrashReport",
    "DuplicateEffect",
    "Effect",
    "Ending",
    "EntrySpec",
    "Ledger",
    "LoopReport",
    "Outcome",
    "Spawn",
    "StatementKiller",
    "check_journal",
    "crash_loop",
    "crash_test",
    "kill_after",
    "kill_after_effect",
    "kill_at_boundary",
    "kill_in_save",
    "load_head",
    "read_journal",
    "resume",
    "statement_label",
    "verify_history",
]
