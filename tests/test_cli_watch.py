"""``safepoint watch`` as an operator runs it: the real executable in a subprocess, following a run
that the test drives to its end (or deletes), on SQLite, PostgreSQL and PostgreSQL through PgBouncer.

Every watch here ends by itself: the test makes the run leave running (or
go away) and waits for the process, which must exit with the documented
code; a watch that did not end would fail the wait, not hang the suite.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from pgbouncer import running_pgbouncer
from safepoint import Run
from safepoint.cli.output import ExitCode
from safepoint_exe import SAFEPOINT, sp

ESC = "\x1b"
RUN_ID = "live" + ESC + "]0;owned" + "\x07"  # a terminal title sequence in the id


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'watch.db'}"
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        yield f"{dsn}?schema={schema}"


def _watching(folder: Path, url: str, run_id: str, *extra: str) -> subprocess.Popen[str]:
    """``safepoint watch`` started, returned once it printed its first line (it has read the run)."""
    proc = subprocess.Popen(
        [SAFEPOINT, "watch", run_id, "--interval", "100ms", "--store", url, *extra],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first, proc.stderr.read() if proc.stderr else ""
    proc.first_line = first  # type: ignore[attr-defined]
    return proc


def _ended(proc: subprocess.Popen[str]) -> tuple[int, list[str], str]:
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, [proc.first_line, *out.splitlines()], err  # type: ignore[attr-defined]


def _drive(url: str, **options: object) -> None:
    """The agent: three more steps, then done (Run.resume, as a restarted process would)."""
    with safepoint.open_store(url, **options) as store:  # type: ignore[arg-type]
        run = Run.resume(store, RUN_ID)
        for n in range(3):
            run.add_usage(tokens_in=1000 * (n + 1), spend=0.5)
            run.commit()
        run.finish()
        run.close()


def test_watch_prints_each_step_and_exits_0_when_the_run_is_done(url: str, tmp_path: Path) -> None:
    """watch --json: one event per new step and status change, the id escaped, exit 0 at done."""
    with safepoint.open_store(url) as store:
        Run.start(store, RUN_ID).close()
    proc = _watching(tmp_path, url, RUN_ID, "--json")
    _drive(url)
    code, lines, err = _ended(proc)
    assert code == 0, err
    assert not any(ESC in line or "\x07" in line for line in lines)
    events = [json.loads(line) for line in lines]
    assert events[0]["event"] == "watching"
    assert events[0]["run_id"] == RUN_ID  # escaped in the text, the same string once parsed
    assert (events[0]["holder"], events[0]["queued"]) == (None, False)  # closed, never queued
    assert [e["step"] for e in events if e["event"] == "step"] == [1, 2, 3, 4]
    assert [e["status"] for e in events if e["event"] == "status"] == ["done"]
    assert events[-1] == {"event": "end", "run_id": RUN_ID, "step": 4, "status": "done"}
    last_step = [e for e in events if e["event"] == "step"][-1]
    assert last_step["counters"]["tokens_in"] == 6000  # the head's counters come with its step


def test_watch_exits_3_when_the_run_is_deleted_and_creates_no_store(tmp_path: Path) -> None:
    """A deleted run ends the watch with exit 3 and one line; a missing store is exit 3, nothing made."""
    url = f"sqlite:///{tmp_path / 'gone.db'}"
    with safepoint.open_store(url) as store:
        Run.start(store, RUN_ID).close()
    proc = _watching(tmp_path, url, RUN_ID)
    assert "\\x1b]0;owned\\x07" in proc.first_line  # type: ignore[attr-defined]
    with safepoint.open_store(url) as store:
        store.delete_run(RUN_ID)
    code, _lines, err = _ended(proc)
    assert code == ExitCode.NOT_FOUND
    assert err.splitlines() == ["error: run live\\x1b]0;owned\\x07 was deleted"]
    missing = sp(tmp_path, "watch", "x", "--store", f"sqlite:///{tmp_path / 'none.db'}")
    assert missing.returncode == ExitCode.NOT_FOUND
    assert not (tmp_path / "none.db").exists()


def test_watch_through_pgbouncer_follows_the_run_to_its_end(tmp_path: Path) -> None:
    """Through PgBouncer in transaction mode (no prepared statements survive there): every step, exit 0."""
    dsn = require_postgres()
    with fresh_schema(dsn) as schema, running_pgbouncer(dsn) as bounced:
        url = f"{bounced}?schema={schema}"
        with safepoint.open_store(url, prepare_threshold=None) as store:
            Run.start(store, RUN_ID).close()
        proc = _watching(tmp_path, url, RUN_ID, "--json", "--interval", "50ms")
        _drive(url, prepare_threshold=None)
        code, lines, err = _ended(proc)
    assert code == 0, err
    events = [json.loads(line) for line in lines]
    assert [e["step"] for e in events if e["event"] == "step"] == [1, 2, 3, 4]
    assert events[-1]["status"] == "done"
