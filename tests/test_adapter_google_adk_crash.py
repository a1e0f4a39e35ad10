"""The Google ADK adapter under the crash kit: SIGKILLed at step boundaries and at random, resumed fresh.

The entry (``tests/helpers/google_adk_crash_agent.py``) plays a scripted
four-turn session through ``SafepointSessionService`` on an ``AsyncStore``,
with session and ``temp:`` state and segments of three events (so kills land
on both sides of a new segment). Each kill is followed by a fresh process that
resumes the session, and the session run's final checkpoint and ADK's view of
the session must equal an uninterrupted run's. Capped: each child imports ADK
afresh.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from safepoint.testing.crash import CrashKit

ENTRY = "helpers.google_adk_crash_agent:run"
SEED = 20_2026


@pytest.mark.crash
def test_killed_after_steps_the_session_resumes_to_the_same_end(tmp_path: Path) -> None:
    """Killed after creating the session, mid-segment, at a segment's first step and at the last step,
    with app- and user-wide state written beside the session on every event."""
    kit = CrashKit(ENTRY, tmp_path, kwargs={"turns": 4, "shared": True}, seed=SEED)
    report = kit.boundaries(steps=[0, 2, 4, 8])
    assert report.kills["boundary"] == 4
    assert report.reference is not None
    final = report.reference.result
    assert len(final["events"]) == 8
    assert final["state"]["app:last_turn"] == 3
    assert final["state"]["user:saw_1"] == 7


@pytest.mark.crash
def test_killed_at_random_instants_the_session_resumes_to_the_same_end(tmp_path: Path) -> None:
    """Killed inside saves, right after them and at random instants: same end."""
    kit = CrashKit(ENTRY, tmp_path, kwargs={"turns": 4}, seed=SEED)
    report = kit.at_random(4, per_run=4)
    assert sum(report.kills.values()) >= 3
