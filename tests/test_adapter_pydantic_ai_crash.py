"""The Pydantic AI adapter under the crash kit: SIGKILLed at step boundaries and at random, resumed fresh.

The entry (``tests/helpers/pydantic_ai_crash_agent.py``) runs a four-turn
conversation of a real ``Agent`` through ``SafepointConversationStore``; after
each kill a fresh process resumes it from the store, and the conversation
run's final checkpoint and Pydantic AI's view of its entries must equal an
uninterrupted run's. Random instants are wall-clock kills around the saves
(the kit's statement kills count every save, the adapter's index runs' too).
Capped: each child imports Pydantic AI afresh.
"""

from __future__ import annotations

from pathlib import Path
from random import Random

import pytest

from safepoint.testing.crash import CrashKit, kill_after, resume

ENTRY = "helpers.pydantic_ai_crash_agent:run"
SEED = 20_2027


@pytest.mark.crash
def test_killed_after_each_step_the_conversation_resumes_to_the_same_end(tmp_path: Path) -> None:
    """Killed after saving each turn in turn, resumed each time in a fresh process: the same end."""
    kit = CrashKit(ENTRY, tmp_path, kwargs={"turns": 4}, seed=SEED)
    report = kit.boundaries()
    assert report.kills["boundary"] == 4
    assert report.reference is not None
    assert len(report.reference.result["entries"]) == 8


@pytest.mark.crash
def test_killed_at_random_instants_the_conversation_resumes_to_the_same_end(tmp_path: Path) -> None:
    """Killed at random instants around the saves (and once from start-up on): the same end."""
    kit = CrashKit(ENTRY, tmp_path, kwargs={"turns": 4}, seed=SEED)
    reference, rng = kit.reference(), Random(SEED)
    spec, head, killed = kit.spec("random"), -1, 0
    for kill in range(4):
        saves = rng.randint(0, 1) if kill else 0
        outcome = kill_after(spec, saves, rng.uniform(0, 0.01) if kill else rng.uniform(0, 0.6))
        killed += outcome.killed
        head = kit.checks.head(spec, head, outcome, f"kill {kill} (pid {outcome.pid})", low=head, high=3)
    finished = resume(spec)
    kit.checks.compare(spec, finished.result, reference, "after the random kills")
    assert killed >= 2
