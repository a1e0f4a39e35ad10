"""``safepoint worker module:function`` as a deployment runs it: a handler module in the current
folder, the real executable in a subprocess, runs enqueued through the library.

It drains the queue and exits (--stop-when-idle); SIGTERM in the middle of
a run ends the step, gives the run back (its attempt uncounted) and exits
0; a handler that cannot be imported is one line and exit 2. Each run's
steps are counted in the store afterwards: none lost, none done twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import safepoint
from safepoint import Run, Status
from safepoint.cli.output import ExitCode
from safepoint_exe import SAFEPOINT, sp

HANDLERS = '''
import os
import time
from pathlib import Path


def handle(job):
    """Three steps, each counted in the state; a stop request ends the run's turn after a step."""
    run = job.open_run()
    while run.active:
        if job.stopping:
            return None
        run.state["n"] = run.state.get("n", 0) + 1
        run.commit()
        if run.state["n"] >= 3:
            run.finish()
    return run.status


def slow(job):
    """Steps until asked to stop; after its first step it says so (a file), for the test to signal."""
    run = job.open_run()
    while run.active:
        if job.stopping:
            return None
        run.state["n"] = run.state.get("n", 0) + 1
        run.commit()
        Path(os.environ["STARTED"]).write_text(job.run_id)
        time.sleep(0.05)
    return run.status
'''


def _queued(url: str, *run_ids: str) -> None:
    with safepoint.open_store(url) as store:
        for run_id in run_ids:
            Run.start(store, run_id).close()
            store.enqueue(run_id)


def test_worker_drains_the_queue_with_a_handler_from_the_current_folder(tmp_path: Path) -> None:
    """Three queued runs, each done after exactly 3 steps; --json says 3 handled; exit 0."""
    (tmp_path / "agent_handlers.py").write_text(HANDLERS)
    url = f"sqlite:///{tmp_path / 'work.db'}"
    _queued(url, "a", "b", "c")
    result = sp(tmp_path, "worker", "agent_handlers:handle", "--stop-when-idle", "--store", url, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["handled"] == 3
    with safepoint.open_store(url) as store:
        for run_id in "abc":
            head = store.load(run_id)
            assert (head.status, head.state["n"], head.step) == (Status.DONE, 3, 4)


def test_worker_serves_the_tenants_it_is_given(tmp_path: Path) -> None:
    """--serve a --serve b=2: both tenants' queued runs done by one worker, the store's own tenant
    (not served) left queued; a bad weight is a usage error."""
    (tmp_path / "agent_handlers.py").write_text(HANDLERS)
    url = f"sqlite:///{tmp_path / 'work.db'}"
    _queued(url, "own")
    for tenant in ("a", "b"):
        with safepoint.open_store(url, tenant=tenant) as store:
            for run_id in ("r1", "r2"):
                Run.start(store, run_id).close()
                store.enqueue(run_id)
    served = ("--serve", "a", "--serve", "b=2", "--tenant-limit", "1")
    result = sp(
        tmp_path, "worker", "agent_handlers:handle", *served, "--stop-when-idle", "--store", url, "--json"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["handled"] == 4
    for tenant in ("a", "b"):
        with safepoint.open_store(url, tenant=tenant, read_only=True) as store:
            assert {store.load(run_id).status for run_id in ("r1", "r2")} == {Status.DONE}
    with safepoint.open_store(url, read_only=True) as store:
        assert store.load("own").status != Status.DONE
    bad = sp(tmp_path, "worker", "agent_handlers:handle", "--serve", "a=x", "--store", url)
    assert bad.returncode == 2
    assert "TENANT=WEIGHT" in bad.stderr


def test_worker_sigterm_mid_run_drains_and_exits_0(tmp_path: Path) -> None:
    """SIGTERM while the handler works: the step in hand is saved, the run goes back to the queue
    with no attempt counted and no lease held, and the process exits 0."""
    (tmp_path / "agent_handlers.py").write_text(HANDLERS)
    url = f"sqlite:///{tmp_path / 'work.db'}"
    _queued(url, "long")
    started = tmp_path / "started"
    proc = subprocess.Popen(
        [SAFEPOINT, "worker", "agent_handlers:slow", "--store", url, "--lease", "60s"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "STARTED": str(started)},
    )
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), proc.communicate(timeout=10)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopped: 1 run handled" in out
    with safepoint.open_store(url) as store:
        info, head, state = store.run("long"), store.load("long"), store.queue_state("long")
        assert info.status is Status.RUNNING
        assert info.attempts == 0  # given back on a stop: uncounted
        assert head.step == head.state["n"] >= 1  # every step it took is saved, one checkpoint each
        assert state.queued
        assert not state.leased()


def test_worker_import_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    """No module, a module that raises, no such function: one line each, exit 2, no traceback."""
    (tmp_path / "broken.py").write_text("raise RuntimeError('bad \\x1b[2J config')\n")
    (tmp_path / "agent_handlers.py").write_text(HANDLERS)
    url = f"sqlite:///{tmp_path / 'none.db'}"
    for spec, said in (
        ("nosuch:handle", "cannot import nosuch: ModuleNotFoundError"),
        ("broken:handle", "cannot import broken: RuntimeError: bad \\x1b[2J config"),
        ("agent_handlers:missing", "agent_handlers has no missing"),
    ):
        result = sp(tmp_path, "worker", spec, "--store", url)
        assert result.returncode == ExitCode.USAGE, result.stderr
        assert said in result.stderr
        assert "Traceback" not in result.stderr
        assert "\x1b" not in result.stderr
    assert not (tmp_path / "none.db").exists()  # refused before the store is opened
