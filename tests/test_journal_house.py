"""The house knows the call journal (issue 32, item 1): verify, show, history, the inspector, forks.

An entry whose result was altered or copied from another entry, or that was
moved to another key, is named by ``safepoint verify`` (run, step and the key
escaped; never the result) on every backend, plain and encrypted; an entry
moved to another step or run changes the count of entries a checkpoint
covers (or lies past the run's next step), and on an encrypted store does
not open for its new place either.
A read never replays a damaged entry. ``show`` prints a step's calls with
their results, ``history`` without; a fork shows its parent's entries up to
the fork step, marked as the parent's, and never replays them. Each command
runs as the real executable in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from helpers import store_targets as targets
from helpers.store_targets import CONFIGS, Target, made
from safepoint import Checkpoint, Store
from safepoint.cli.output import ExitCode
from safepoint.errors import CorruptCall, CorruptCheckpoint
from safepoint.records import CallUsage
from safepoint.testing.crash import verify_history
from safepoint.ui import create_app
from safepoint.ui.paths import run_path
from safepoint.ui.verifying import verify_run

MARKER = "JOURNAL-VALUE-5e1d"  # in results only: verify and history never print it
HOSTILE = "tool:\x1b[31mpay\u202e<b>|1"  # a key as a framework might make it, with terminal and bidi codes


@pytest.fixture(params=CONFIGS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    with made(request.param, tmp_path) as made_target:
        yield made_target


def sp(target: Target, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real executable on the target's store (the keyring in its environment when encrypted)."""
    result = targets.sp(target, cwd, *args)
    for raw_code in ("\x1b", "\u202e"):  # a key's codes are shown escaped, never written raw
        assert raw_code not in result.stdout + result.stderr
    return result


def journal_run(store: Store, run_id: str = "r") -> None:
    """Three checkpoints; a model call at step 1, a tool result and an intent at step 2, and a
    model call recorded after the head (the open step 3)."""
    cp = Checkpoint(run_id=run_id)
    store.save(cp)
    store.record_call(
        run_id, "model#1", {"text": f"{MARKER} one"}, request={"q": 1}, usage=CallUsage(10, 5, 0.25)
    )
    cp = cp.next()
    store.save(cp)
    store.record_call(run_id, HOSTILE, {"receipt": f"{MARKER} paid"}, request={"amount": 5})
    store.call_intent(run_id, "tool:charge", request={"amount": 7})
    store.save(cp.next())
    store.record_call(run_id, "model#3", {"text": f"{MARKER} three"}, usage=CallUsage(3, 4, 0.5))


def verify_json(target: Target, cwd: Path) -> dict[str, Any]:
    result = sp(target, cwd, "verify", "--json")
    assert MARKER not in result.stdout + result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    assert result.returncode == (ExitCode.FAILURE if data["failures"] else 0), result.stderr
    return data


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    folder = tmp_path / "cwd"
    folder.mkdir()
    return folder


# -- verify -----------------------------------------------------------------------------------


def test_verify_names_an_altered_or_moved_entry_never_its_value(target: Target, cwd: Path) -> None:
    """A result copied from another entry and an entry moved to another key: each named by run,
    step and key (escaped), in verify, the store and the inspector; never read back as a result."""
    with target.open() as store:
        journal_run(store)
    assert verify_json(target, cwd) == {"checked": 3, "calls": 4, "failures": [], "redactions": []}
    target.execute(
        "UPDATE safepoint_calls SET result = (SELECT result FROM safepoint_calls WHERE key = 'model#3')"
        " WHERE key LIKE 'tool:%'  AND state = 'done'"
    )
    target.execute("UPDATE safepoint_calls SET key = 'moved' WHERE key = 'model#1'")
    failures = verify_json(target, cwd)["failures"]
    assert sorted((f["run_id"], f["step"], f["error"]) for f in failures) == [
        ("r", 1, "CorruptCall"),
        ("r", 2, "CorruptCall"),
    ]
    messages = " ".join(f["message"] for f in failures)
    assert "call 'moved'" in messages
    assert "call 'tool:\\x1b[31mpay\\u202e<b>|1'" in messages  # the key, escaped
    human = sp(target, cwd, "verify")
    assert human.returncode == ExitCode.FAILURE
    assert "\\x1b[31mpay" in human.stdout
    assert "2 failed" in human.stdout
    with target.open(read_only=True) as store:
        found = store.verify_calls("r")
        assert found.checked == 4
        assert sorted((d.step, d.key) for d in found.damaged) == [(1, "moved"), (2, HOSTILE)]
        assert all(isinstance(d, CorruptCall) and MARKER not in str(d) for d in found.damaged)
        with pytest.raises(CorruptCheckpoint):  # never replayed: CorruptCall, or a seal that does not open
            store.recorded_call("r", HOSTILE)
        assert store.recorded_call("r", "model#3") is not None  # the intact entries still read
        _, inspected = verify_run(store, "r")  # the inspector's verify
        assert sorted(step for step, _ in inspected) == [1, 2]


def test_an_entry_moved_to_another_step_or_run(target: Target, cwd: Path) -> None:
    """Each checkpoint counts the entries it covers and no entry is past its run's next step, so
    an entry moved to another step or run is seen on every store; an encrypted store's result is
    sealed for run and step too, so there the moved entry itself does not open."""
    with target.open() as store:
        journal_run(store)
        store.save(Checkpoint(run_id="other"))
    target.execute("UPDATE safepoint_calls SET step = 2 WHERE key = 'model#1'")
    target.execute(
        "UPDATE safepoint_calls SET run_ref = (SELECT id FROM safepoint_runs WHERE run_id = 'other')"
        " WHERE key = 'model#3'"
    )
    failures = verify_json(target, cwd)["failures"]
    found = sorted((f["run_id"], f["step"], f["error"]) for f in failures)
    sealed = [("r", 2, "CorruptCall")] if target.encrypted else []
    assert found == [
        ("other", 3, "CorruptCall"),  # past other's next step; encrypted: does not open there
        ("r", 1, "CorruptCheckpoint"),  # step 1's checkpoint covers 1 entry: none is left
        *sealed,
        ("r", 2, "CorruptCheckpoint"),  # step 2's covers 2: 3 are stored
    ]
    messages = {(f["run_id"], f["step"], f["error"]): f["message"] for f in failures}
    assert "covers 1 recorded calls, but 0 are stored" in messages["r", 1, "CorruptCheckpoint"]
    if target.encrypted:
        assert "does not open" in messages["other", 3, "CorruptCall"]


@pytest.mark.parametrize("config", ["sqlite", "postgres"])
def test_a_deleted_entry_is_named_by_its_step(config: str, tmp_path: Path, cwd: Path) -> None:
    """An entry deleted from a step whose checkpoint is saved: verify names the run and the step
    (its checkpoint covers more entries than are stored); one of the open step is the in-flight
    gap a resume makes again, so none is named for it."""
    with made(config, tmp_path) as target:
        with target.open() as store:
            journal_run(store)
        target.execute("DELETE FROM safepoint_calls WHERE key IN ('tool:charge', 'model#3')")
        failures = verify_json(target, cwd)["failures"]
        assert [(f["run_id"], f["step"], f["error"]) for f in failures] == [("r", 2, "CorruptCheckpoint")]
        assert "covers 2 recorded calls, but 1 are stored" in failures[0]["message"]


def test_the_crash_kit_and_show_see_a_damaged_journal(tmp_path: Path, cwd: Path) -> None:
    """``verify_history`` raises the damaged entry's CorruptCall; show, history and the inspector's
    step page still show the checkpoint and say the journal is unreadable."""
    with made("sqlite", tmp_path) as target:
        with target.open() as store:
            journal_run(store)
        assert verify_history(target.url, "r") == 3
        target.execute("UPDATE safepoint_calls SET key = 'moved' WHERE key = 'model#1'")
        with pytest.raises(CorruptCall) as caught:
            verify_history(target.url, "r")
        assert (caught.value.run_id, caught.value.step, caught.value.key) == ("r", 1, "moved")
        shown = sp(target, cwd, "show", "r", "--step", "1", "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["calls"] == {"unreadable": "CorruptCall"}
        head = json.loads(sp(target, cwd, "show", "r", "--json").stdout)["calls"]
        assert len(head) == 3  # the head's calls are whole: only step 1's read fails
        history = sp(target, cwd, "history", "r")
        assert history.returncode == 0, history.stderr
        assert "unreadable (CorruptCall" in history.stdout
        with target.open(read_only=True) as store:
            page = TestClient(create_app(store), base_url="http://127.0.0.1:8765").get(run_path("r", step=1))
        assert page.status_code == 200
        assert "unreadable (CorruptCall)" in page.text


# -- show, history, the inspector, forks ------------------------------------------------------


def test_show_and_history_list_a_steps_calls(tmp_path: Path, cwd: Path) -> None:
    """show: the step's calls with their results (the head: the open step's too); history: every
    step's calls — key, state, when, usage — and no result."""
    with made("sqlite", tmp_path) as target:
        with target.open() as store:
            journal_run(store)
        shown = json.loads(sp(target, cwd, "show", "r", "--json").stdout)["calls"]
        assert [(c["key"], c["step"], c["state"], c["whose"]) for c in shown] == [
            (HOSTILE, 2, "done", "own"),
            ("tool:charge", 2, "intent", "own"),
            ("model#3", 3, "done", "open"),
        ]
        assert shown[0]["result"] == {"receipt": f"{MARKER} paid"}
        assert shown[2]["usage"] == {"tokens_in": 3, "tokens_out": 4, "spend": 0.5}
        at_one = json.loads(sp(target, cwd, "show", "r", "--step", "1", "--json").stdout)["calls"]
        assert [(c["key"], c["whose"], c["result"]) for c in at_one] == [
            ("model#1", "own", {"text": f"{MARKER} one"})
        ]
        human = sp(target, cwd, "show", "r").stdout
        assert "recorded calls of step 2" in human
        assert "tool:\\x1b[31mpay\\u202e<b>|1" in human
        assert f"{MARKER} paid" in human  # show prints values
        rows = json.loads(sp(target, cwd, "history", "r", "--json").stdout)
        assert [[c["key"] for c in row["calls"]] for row in rows] == [
            [],
            ["model#1"],
            [HOSTILE, "tool:charge", "model#3"],
        ]
        assert all("result" not in c for row in rows for c in row["calls"])
        assert rows[1]["calls"][0]["usage"] == {"tokens_in": 10, "tokens_out": 5, "spend": 0.25}
        history = sp(target, cwd, "history", "r").stdout
        assert "recorded calls" in history
        assert "10 in, 5 out, spend 0.25" in history
        assert "after it (open step)" in history
        assert MARKER not in history  # history prints no value


def test_a_fork_shows_its_parents_entries_and_never_replays_them(tmp_path: Path, cwd: Path) -> None:
    """A fork at step 1 shows the parent's entries up to step 1, marked as the parent's, in show,
    history and the inspector; its own reads of those keys find nothing; a fork of the fork too."""
    with made("sqlite", tmp_path) as target:
        with target.open() as store:
            journal_run(store)
            fork = store.fork("r", 1, new_run_id="f")
            store.save(fork.next())
            store.record_call("f", "model#f", {"text": "the fork's own"})
            assert store.recorded_call("f", "model#1") is None  # entries are the run's: never replayed
            assert store.recorded_calls("f") == [store.recorded_call("f", "model#f")]
            again = store.fork("f", 2, new_run_id="ff")
            assert again.step == 2
        rows = json.loads(sp(target, cwd, "history", "f", "--json").stdout)
        assert [row["step"] for row in rows] == [1, 2]
        first = [(c["run_id"], c["key"], c["step"], c["whose"]) for c in rows[0]["calls"]]
        assert first == [("r", "model#1", 1, "parent")]
        assert [(c["key"], c["whose"]) for c in rows[1]["calls"]] == [("model#f", "open")]
        human = sp(target, cwd, "history", "f").stdout
        assert "parent r" in human
        shown = json.loads(sp(target, cwd, "show", "f", "--step", "1", "--json").stdout)["calls"]
        assert [(c["run_id"], c["whose"], c["result"]) for c in shown] == [
            ("r", "parent", {"text": f"{MARKER} one"})
        ]
        grand = json.loads(sp(target, cwd, "history", "ff", "--json").stdout)[0]["calls"]
        assert [(c["run_id"], c["key"]) for c in grand] == [("r", "model#1")]  # f's model#f is of step 3
        with target.open(read_only=True) as store:
            client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
            page = client.get(run_path("f", step=1)).text
            own = client.get(run_path("r", step=2)).text
        calls = page[page.index('id="calls"') :]
        assert '<tr class="call parent">' in calls
        assert f'parent <a href="{run_path("r", step=1)}">r</a>' in calls
        assert "model#1" in calls
        assert "tool:charge" not in calls  # the parent's step 2 is past the fork step
        table = own[own.index('id="calls"') : own.index("</table>", own.index('id="calls"'))]
        assert table.count('<tr class="call own">') == 2
        assert table.count('<tr class="call open">') == 1
        assert "&lt;b&gt;" in table  # the key as text, never markup
        assert "<b>" not in table
