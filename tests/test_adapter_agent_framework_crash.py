"""A real Agent Framework workflow checkpointing on safepoint, SIGKILLed and resumed in fresh processes.

Through the crash-test kit (``safepoint.testing.crash``): the workflow of
``helpers.agent_framework_crash_agent`` (five turns, one superstep each) is
killed after every step of its run and at random instants, resumed each time
in a new process from the latest checkpoint in the store, and must end with
the same final checkpoint and the same conversation as an uninterrupted run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.agent_framework_crash_agent import RUN_ID
from safepoint.testing.crash import CrashKit

ENTRY = "helpers.agent_framework_crash_agent:run"
SEED = 20_2025


@pytest.mark.crash
def test_killed_at_every_step_the_workflow_resumes_to_the_same_end(tmp_path: Path) -> None:
    """Killed after each step of the workflow's run (index runs on): each resume ends as the reference."""
    kit = CrashKit(ENTRY, tmp_path, run_id=RUN_ID, kwargs={"turns": 5}, seed=SEED)
    report = kit.boundaries()
    assert report.kills["boundary"] == 7  # the opening step, the start and one checkpoint per turn
    assert report.reference is not None
    assert len(report.reference.result) == 10


@pytest.mark.crash
def test_killed_at_random_instants_the_workflow_resumes_to_the_same_end(tmp_path: Path) -> None:
    """Killed inside saves and at random instants: every resume ends as the reference.

    Without index runs (``index=False``) the workflow's run is the only one written, so the
    kit's save-counting kills land on the step it aims at."""
    kit = CrashKit(ENTRY, tmp_path, run_id=RUN_ID, kwargs={"turns": 5, "index": False}, seed=SEED)
    report = kit.at_random(6, per_run=3)
    assert sum(report.kills.values()) >= 4
