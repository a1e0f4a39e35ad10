"""``safepoint demo`` end to end: a child killed mid-run, resumed in a fresh one, finished exactly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import safepoint
from safepoint.demo import main
from safepoint.demo.agent import DEMO_API_KEY, run_demo_agent, store_options
from safepoint.testing.crash import Ledger

ROOT = Path(__file__).resolve().parent.parent


def test_demo_kills_resumes_and_finishes_exactly(tmp_path: Path) -> None:
    """The demo exits 0 with its summary and leaves one DONE run equal to an uninterrupted one."""
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "safepoint.demo", url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with safepoint.open_store(url, **store_options()) as store:
        (run,) = store.runs()
        assert run.status is safepoint.Status.DONE
        assert [info.step for info in store.history(run.run_id)] == list(range(run.head_step + 1))
        final = store.load(run.run_id)
    with safepoint.open_store("memory://", **store_options()) as scratch, Ledger(tmp_path / "l.db") as ledger:
        run_demo_agent(scratch, run.run_id, ledger)
        expected = scratch.load(run.run_id)
    assert final.counters == expected.counters
    assert final.state == expected.state
    assert list(final.messages) == list(expected.messages)
    assert "SIGKILL" in done.stdout
    for row in ("secrets referenced", "blobs offloaded", "side effects", "checkpoints", "bytes stored"):
        assert row in done.stdout
    assert f"safepoint show {run.run_id}" in done.stdout
    assert DEMO_API_KEY not in done.stdout
    for written in tmp_path.glob("demo.db*/**/*"):  # the database, its WAL, blobs
        assert not written.is_file() or DEMO_API_KEY.encode() not in written.read_bytes()


def test_demo_refuses_a_store_a_child_process_cannot_share() -> None:
    """memory:// lives in one process, so the demo says so and exits 2 instead of crashing."""
    assert main("memory://") == 2


def test_the_inspect_lines_work_when_pasted_from_the_repo_root(tmp_path: Path) -> None:
    """Run from the repo root as ``make demo`` does, on a store whose path has a space in it and
    a terminal narrower than the lines: each printed command, pasted into a shell there, exits 0."""
    url = f"sqlite:///{tmp_path / 'my store' / 'demo.db'}"
    (tmp_path / "my store").mkdir()
    env = {**os.environ, "COLUMNS": "60"}
    done = subprocess.run(
        [sys.executable, "-m", "safepoint.demo", url],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    _, marker, tail = done.stdout.partition("Inspect it")
    assert marker, done.stdout
    commands = [line.strip() for line in tail.splitlines()[1:] if line.strip()]
    assert len(commands) == 3, tail
    with safepoint.open_store(url, **store_options()) as store:
        (run,) = store.runs()
    wide = {**os.environ, "COLUMNS": "200"}  # the narrow terminal was the demo's; read the answers whole
    for command in commands:
        assert "safepoint" in command.split()[0]
        assert url in command.replace("'", "")  # the store the demo used, quoted for the shell
        pasted = subprocess.run(
            command, shell=True, capture_output=True, text=True, cwd=ROOT, timeout=60, check=False, env=wide
        )
        assert pasted.returncode == 0, f"{command}\n{pasted.stdout}{pasted.stderr}"
        assert run.run_id in pasted.stdout, command


def test_make_demo_says_when_it_sets_up_and_how_long_that_took(tmp_path: Path) -> None:
    """On a fresh clone (no venv yet) ``make demo`` first says it is setting up and about how long
    that takes, and says how long it took; once set up, a changed pyproject.toml says "Updating".
    ``make -n`` shows the recipe without installing anything."""
    venv = tmp_path / "venv"

    def plan() -> str:
        # As a user types it: not a sub-make of `make test` (whose MAKEFLAGS and
        # MAKELEVEL would add "Entering directory" lines and its own flags).
        inherited = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")
        env = {k: v for k, v in os.environ.items() if k not in inherited}
        dry = subprocess.run(
            ["make", "--no-print-directory", "-n", f"VENV={venv}", "demo"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        assert dry.returncode == 0, dry.stderr
        return dry.stdout

    first = plan().splitlines()
    assert first[0].startswith(f'echo "Setting up {venv} on first run (about ')
    assert "minutes" in first[0]
    assert any(f"{venv} ready in" in line for line in first), first
    assert first[-1] == f"{venv}/bin/safepoint demo"
    venv.mkdir()
    (venv / ".installed").touch()
    os.utime(venv / ".installed", (0, 0))  # older than pyproject.toml
    assert plan().splitlines()[0].startswith(f'echo "Updating {venv}: pyproject.toml')
