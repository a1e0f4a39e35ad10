"""``safepoint fork`` (with an edit, with --requeue), ``requeue`` of a finished run and ``history``'s
wording of actions, run as the real executable from an empty folder on SQLite and PostgreSQL.

Each test seeds the store through the library as an agent would, runs the
command, then checks through the library what it wrote — and, for what it
refused, that it wrote nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from safepoint import Checkpoint, Run
from safepoint.cli.output import ExitCode
from safepoint_exe import sp

ESC = "\x1b"


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fork.db'}"
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        yield f"{dsn}?schema={schema}"


@pytest.fixture
def sqlite(tmp_path: Path) -> str:
    """The refusals and wordings are the CLI's own, the same on both backends: SQLite only (time)."""
    return f"sqlite:///{tmp_path / 'fork.db'}"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    empty = tmp_path / "cwd"
    empty.mkdir()
    return empty


def _agent(store: safepoint.Store, run_id: str) -> None:
    """A Run-written run of 4 steps (0..3), done at step 3, its plan in its state."""
    run = Run.start(store, run_id, state={"plan": "a"}, messages=[{"role": "user", "content": "refund 42"}])
    for n in range(2):
        run.append({"role": "assistant", "content": f"thinking {n}"})
        run.commit()
    run.finish()
    run.close()


def test_fork_with_an_edit_and_requeue_leaves_the_parent_untouched_and_a_worker_resumes_it(
    url: str, folder: Path
) -> None:
    """fork --step 1 --set-state --last-message --requeue: the edit is the fork's step 2, the parent's
    step 1 is as it was, and a worker claims the fork."""
    with safepoint.open_store(url) as store:
        _agent(store, "agent")
        before = store.load("agent", 1)
    new_id = "try" + ESC + "[2J2"
    result = sp(
        folder, "fork", "agent", "--step", "1", "--new-id", new_id, "--set-state", 'plan="b"',
        "--last-message", "[bold]rewritten[/bold]", "--requeue", "--store", url, "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert ESC not in result.stdout
    data = json.loads(result.stdout)
    assert data["run_id"] == new_id
    assert (data["parent"], data["head_step"], data["edited_step"], data["queued"]) == (
        {"run_id": "agent", "step": 1}, 2, 2, True,
    )  # fmt: skip
    text = sp(folder, "fork", "agent", "--step", "0", "--new-id", new_id + "-b", "--store", url)
    assert text.returncode == 0, text.stderr
    assert "\\x1b[2J" in text.stdout  # the id as given, its escape shown
    assert ESC not in text.stdout
    with safepoint.open_store(url) as store:
        assert store.load("agent", 1).to_dict() == before.to_dict()  # by reference: the parent untouched
        assert [i.step for i in store.history(new_id)] == [1, 2]
        edited = store.load(new_id)
        assert edited.parent is not None
        assert (edited.parent.run_id, edited.parent.step) == ("agent", 1)
        assert edited.state == {**before.state, "plan": "b"}
        assert edited.messages[:-1] == before.messages[:-1]
        assert edited.messages[-1] == {**before.messages[-1], "content": "[bold]rewritten[/bold]"}
        lease = store.claim("worker-1")
        assert lease is not None
        assert lease.run_id == new_id
        assert store.queue_state(new_id + "-b").queued is False  # forked without --requeue


def test_fork_refuses_requeue_for_an_adapter_run_and_a_finished_step_and_writes_nothing(
    sqlite: str, folder: Path
) -> None:
    """--requeue: an adapter's run is its framework's to resume (exit 2), a done step has nothing to
    run (exit 6); without --requeue the adapter's run forks. A missing run is exit 3."""
    with safepoint.open_store(sqlite) as store:
        _agent(store, "agent")
        store.save(Checkpoint(run_id="thread-1", labels={"safepoint.adapter": "langgraph"}))
    adapter = sp(folder, "fork", "thread-1", "--new-id", "x1", "--requeue", "--store", sqlite)
    assert adapter.returncode == ExitCode.USAGE, adapter.stderr
    assert "framework resumes it" in adapter.stderr
    assert "Traceback" not in adapter.stderr
    finished = sp(folder, "fork", "agent", "--new-id", "x2", "--requeue", "--store", sqlite, "--json")
    assert finished.returncode == ExitCode.CONFLICT, finished.stderr
    error = json.loads(finished.stderr)
    assert error["type"] == "RunStatusError"
    assert "nothing for a worker to run" in error["error"]
    missing = sp(folder, "fork", "nope", "--store", sqlite)
    assert missing.returncode == ExitCode.NOT_FOUND
    assert len(missing.stderr.splitlines()) == 1
    plain = sp(folder, "fork", "thread-1", "--new-id", "x3", "--store", sqlite)
    assert plain.returncode == 0, plain.stderr
    assert "resume it through its framework" in plain.stdout
    with safepoint.open_store(sqlite) as store:
        assert {r.run_id for r in store.runs()} == {"agent", "thread-1", "x3"}


def test_requeue_refuses_done_and_cancelled_runs_and_history_says_an_action_finished(
    sqlite: str, folder: Path
) -> None:
    """requeue of a done or cancelled run: exit 6, nothing queued. history: an action a later step
    no longer has pending is "finished by step N", not "in flight"."""
    with safepoint.open_store(sqlite) as store:
        _agent(store, "agent")
        run = Run.start(store, "payer")
        run.action("refund", {"order": 42}, lambda key: "refunded")
        run.commit()
        run.close()
        store.cancel("payer")
    for run_id, status in (("agent", "done"), ("payer", "cancelled")):
        refused = sp(folder, "requeue", run_id, "--store", sqlite)
        assert refused.returncode == ExitCode.CONFLICT, refused.stderr
        assert f"is {status}: a worker would have nothing to run" in refused.stderr
    history = sp(folder, "history", "payer", "--store", sqlite, columns=200)
    assert history.returncode == 0, history.stderr
    assert 'action refund({"order": 42}) · finished by step 2' in history.stdout
    assert "in flight" not in history.stdout
    steps = json.loads(sp(folder, "history", "payer", "--store", sqlite, "--json").stdout)
    assert [s["pending_until"] for s in steps] == [None, 2, None, None]
    with safepoint.open_store(sqlite) as store:
        assert not store.queue_state("agent").queued
        assert not store.queue_state("payer").queued
