"""The safepoint command, run as a real subprocess against a real SQLite file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import safepoint
from safepoint import Checkpoint, Status
from safepoint.cli.output import ExitCode


def cli(*args: str, env_store: str | None = None) -> subprocess.CompletedProcess[str]:
    env = None
    if env_store is not None:
        import os  # noqa: PLC0415

        env = {**os.environ, "SAFEPOINT_STORE": env_store}
    return subprocess.run(
        [sys.executable, "-m", "safepoint.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with safepoint.open_store(url) as store:
        for n in range(3):
            cp = Checkpoint(run_id=f"run-{n}", labels={"team": "x" if n else "y"})
            cp.messages.append({"role": "user", "content": f"hello {n}"})
            cp.counters["tokens_in"] = 10 * n
            store.save(cp)
            cp.step += 1
            cp.messages.append({"role": "assistant", "content": "hi " * 100})
            cp.status = Status.DONE if n == 2 else Status.RUNNING
            store.save(cp)
    return url


def test_runs_json_lists_every_run_newest_first(url: str) -> None:
    """`safepoint runs --json` prints every run with its status and step."""
    result = cli("runs", "--store", url, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [r["run_id"] for r in data["runs"]] == ["run-2", "run-1", "run-0"]
    assert data["runs"][0]["status"] == "done"
    assert data["runs"][0]["head_step"] == 1
    assert data["next_cursor"] is None


def test_runs_filters_and_pages(url: str) -> None:
    """`--status`, `--label` and `--limit/--cursor` narrow and page the listing."""
    done = json.loads(cli("runs", "--store", url, "--json", "--status", "done").stdout)
    assert [r["run_id"] for r in done["runs"]] == ["run-2"]
    labelled = json.loads(cli("runs", "--store", url, "--json", "--label", "team=x").stdout)
    assert {r["run_id"] for r in labelled["runs"]} == {"run-1", "run-2"}
    first = json.loads(cli("runs", "--store", url, "--json", "--limit", "2").stdout)
    rest = json.loads(
        cli("runs", "--store", url, "--json", "--limit", "2", "--cursor", first["next_cursor"]).stdout
    )
    assert [r["run_id"] for r in first["runs"] + rest["runs"]] == ["run-2", "run-1", "run-0"]


def test_runs_table_for_people(url: str) -> None:
    """Without --json, runs prints a table naming each run (store URL from the environment)."""
    result = cli("runs", env_store=url)
    assert result.returncode == 0, result.stderr
    for n in range(3):
        assert f"run-{n}" in result.stdout


def test_show_latest_and_a_given_step(url: str) -> None:
    """`safepoint show RUN [--step N]` prints that checkpoint, all of it with --json."""
    latest = json.loads(cli("show", "run-1", "--store", url, "--json").stdout)
    assert latest["step"] == 1
    assert len(latest["messages"]) == 2
    assert latest["counters"] == {"tokens_in": 10}
    first = json.loads(cli("show", "run-1", "--store", url, "--json", "--step", "0").stdout)
    assert first["step"] == 0
    assert first["messages"] == [{"role": "user", "content": "hello 1"}]
    table = cli("show", "run-1", "--store", url)
    assert table.returncode == 0, table.stderr
    assert "run run-1 · step 1" in table.stdout
    assert "tokens_in=10" in table.stdout


def test_missing_run_is_a_one_line_error(url: str) -> None:
    """Unknown runs and steps exit with the not-found code and one clear line on stderr, no traceback."""
    for args in (["show", "nope"], ["show", "run-0", "--step", "9"]):
        result = cli(*args, "--store", url)
        assert result.returncode == ExitCode.NOT_FOUND
        assert result.stderr.startswith("error: run ")
        assert "not found" in result.stderr
        assert "Traceback" not in result.stderr


def test_bad_store_url_is_reported(tmp_path: Path) -> None:
    """An unsupported store URL is a clear error, not a traceback."""
    result = cli("runs", "--store", "mysql://nowhere")
    assert result.returncode == 2  # a usage error: the URL is the operator's argument
    assert "unsupported store URL" in result.stderr


def test_history_diff_verify(url: str, tmp_path: Path) -> None:
    """`history` lists steps; `diff` shows added messages and changed fields; `verify` passes."""
    result = cli("history", "run-1", "--store", url, "--json")
    assert result.returncode == 0, result.stderr
    assert [h["step"] for h in json.loads(result.stdout)] == [0, 1]
    result = cli("diff", "run-2", "0", "1", "--store", url, "--json")
    assert result.returncode == 0, result.stderr
    changed = json.loads(result.stdout)
    assert changed["messages"]["shared"] == 1
    assert [m["role"] for m in changed["messages"]["added"]] == ["assistant"]
    assert {c["path"] for c in changed["fields"]} == {"status"}
    result = cli("verify", "--store", url, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"checked": 6, "calls": 0, "failures": [], "redactions": []}


def test_verify_names_a_corrupt_checkpoint(url: str, tmp_path: Path) -> None:
    """`verify` exits 1 and names run and step of a checkpoint whose stored header was altered."""
    import sqlite3  # noqa: PLC0415

    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE safepoint_checkpoints"
            " SET header = CAST(replace(CAST(header AS TEXT), 'running', 'runnin_') AS BLOB)"
            " WHERE step = 0 AND run_ref = (SELECT id FROM safepoint_runs WHERE run_id = 'run-0')"
        )
    result = cli("verify", "--store", url, "--json")
    assert result.returncode == 1
    failures = json.loads(result.stdout)["failures"]
    assert [(f["run_id"], f["step"], f["error"]) for f in failures] == [("run-0", 0, "CorruptCheckpoint")]


def test_export_then_import_reproduces_a_run(url: str, tmp_path: Path) -> None:
    """`export` writes a fixture; `import` starts a new run from it that loads the same content."""
    fixture = tmp_path / "run-1.json"
    result = cli("export", "run-1", "--store", url, "-o", str(fixture))
    assert result.returncode == 0, result.stderr
    target = f"sqlite:///{tmp_path / 'other.db'}"
    result = cli("import", str(fixture), "--store", target, "--run-id", "copy", "--json")
    assert result.returncode == 0, result.stderr
    with safepoint.open_store(url) as source, safepoint.open_store(target) as copy:
        original, imported = source.load("run-1"), copy.load("copy")
        assert imported.step == 0
        assert imported.messages == original.messages
        assert imported.counters == original.counters
        assert imported.labels == {**original.labels, "imported_from": "run-1@1"}
