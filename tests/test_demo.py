"""``safepoint demo`` end to end: a child killed mid-save, resumed in a fresh one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import safepoint
from safepoint.demo import AGENT_SEED, TOTAL_STEPS, main
from safepoint.testing.agent import run_agent


def test_demo_kills_resumes_and_finishes_exactly(tmp_path: Path) -> None:
    """The demo exits 0 and leaves one DONE run with an uninterrupted run's counters."""
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "safepoint.demo", url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with safepoint.open_store(url) as store:
        (run,) = store.runs()
        assert run.status is safepoint.Status.DONE
        assert run.head_step == TOTAL_STEPS - 1
        assert [info.step for info in store.history(run.run_id)] == list(range(TOTAL_STEPS))
        final = store.load(run.run_id)
    with safepoint.open_store("memory://") as scratch:
        expected = run_agent(scratch, run.run_id, total_steps=TOTAL_STEPS, seed=AGENT_SEED)
    assert final.counters == expected.counters
    assert final.state["answer"] == expected.state["answer"]
    assert "SIGKILL" in done.stdout
    assert f"safepoint show {run.run_id}" in done.stdout


def test_demo_refuses_a_store_a_child_process_cannot_share() -> None:
    """memory:// lives in one process, so the demo says so and exits 2 instead of crashing."""
    assert main("memory://") == 2
