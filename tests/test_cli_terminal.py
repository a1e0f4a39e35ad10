"""Stored text reaches the terminal as text: the real ``safepoint`` executable on a hostile SQLite store.

Every stored string here was written by an attacker: escape sequences (window
title, clear screen, cursor moves, OSC 8 hyperlinks), BEL, bidi overrides,
zero-width characters, forged log lines, and rich markup. The CLI must print
them with control characters made visible and the markup as the characters
it is, in tables and in JSON, on stdout and stderr.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

import safepoint
from safepoint import Checkpoint
from safepoint.cli import output
from safepoint.refs import BlobLink, ScrubbedText, SecretRef

SAFEPOINT = Path(sys.executable).with_name("safepoint")  # the installed console script

RUN_ID = "run\x1b]0;title\x07\u202e[bold]"
SHOWN_RUN_ID = "run\\x1b]0;title\\x07\\u202e[bold]"
MARKUP = "[link=https://evil.example]click[/link] [bold red]x[/] [ :thumbs_up:"
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[1;1H\u202e\u200b\ufeff\x9b\x7f"
SHOWN_ESCAPES = "\\x1b]0;pwned\\x07\\x1b[2J\\x1b[1;1H\\u202e\\u200b\\ufeff\\x9b\\x7f"
OSC8 = "\x1b]8;;https://evil.example\x1b\\here\x1b]8;;\x1b\\"
FORGED = "ok\r\nERROR forged line"
LABELS = {"[link=https://evil.example]k": "\x1b[2J[/]", "team": "\u2066x\u2069"}
PENDING = {"tool": "[bold]rm[/bold]", "args": {"path": "\u202e/etc"}, "idempotency_key": "k\x1b[2J"}
# Characters a terminal or log viewer acts on instead of showing: none may reach the output raw.
HIDDEN = {"Cc", "Cf", "Cs", "Zl", "Zp"}
# What rich itself writes when it believes stdout is a colour terminal: styles only.
RICH_STYLE = re.compile(r"\x1b\[[0-9;]*m")


def safepoint_cli(
    *args: str, terminal: bool = False, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed ``safepoint`` command as an operator runs it; ``terminal``: rich thinks it has a tty."""
    environment = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    environment["COLUMNS"] = "300"  # wide enough that no table cell wraps in the middle of a literal
    if terminal:
        environment.update(FORCE_COLOR="1", TERM="xterm-256color")
    return subprocess.run(
        [str(SAFEPOINT), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        env=environment,
        cwd=cwd,
        check=False,
    )


def raw_controls(text: str) -> list[str]:
    """The control and format characters in ``text`` other than the line breaks the CLI writes."""
    return [c for c in text if c != "\n" and unicodedata.category(c) in HIDDEN]


def assert_safe(result: subprocess.CompletedProcess[str], *, terminal: bool = False) -> None:
    out, err = result.stdout, result.stderr
    if terminal:
        out, err = RICH_STYLE.sub("", out), RICH_STYLE.sub("", err)
    assert raw_controls(out) == [], out
    assert raw_controls(err) == [], err
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store whose run id, labels, messages, state, cursors and pending action are all hostile."""
    path = tmp_path_factory.mktemp("hostile") / "hostile.db"
    url = f"sqlite:///{path}"
    with safepoint.open_store(url) as store:
        cp = Checkpoint(run_id=RUN_ID, labels=dict(LABELS))
        for text in (MARKUP, ESCAPES, OSC8, FORGED):
            cp.messages.append({"role": "user", "content": text})
        cp.messages.append({"role": "tool\x07", "content": {"stdout": ESCAPES}})
        cp.state.update({"markup": MARKUP, "escapes": ESCAPES})
        cp.cursors["batch\x1b[2J"] = 1
        cp.pending_action = dict(PENDING)
        store.save(cp)
        cp.step += 1
        cp.messages.append({"role": "assistant", "content": MARKUP + " " + ESCAPES})
        cp.state["markup"] = "[/]" + MARKUP
        cp.counters["tokens_in"] = 7
        store.save(cp)
        store.fork(RUN_ID, 1, new_run_id=RUN_ID + "-fork")
    return url


def test_tables_show_escapes_and_markup_as_text(hostile: str) -> None:
    """`runs`, `show`, `history` and `diff` print hostile text escaped and markup literally."""
    runs = safepoint_cli("runs", "--store", hostile)
    show = safepoint_cli("show", RUN_ID, "--store", hostile)
    history = safepoint_cli("history", RUN_ID, "--store", hostile)
    diff = safepoint_cli("diff", RUN_ID, "0", "1", "--store", hostile)
    fork = safepoint_cli("show", RUN_ID + "-fork", "--store", hostile)
    for result in (runs, show, history, diff, fork):
        assert result.returncode == 0, result.stderr
        assert_safe(result)
    assert SHOWN_RUN_ID in runs.stdout
    assert "[link=https://evil.example]k=\\x1b[2J[/]" in runs.stdout
    assert "team=\\u2066x\\u2069" in runs.stdout
    assert f"run {SHOWN_RUN_ID} · step 1" in show.stdout
    shown_osc8 = "\\x1b]8;;https://evil.example\\x1b\\here"
    for literal in (MARKUP, SHOWN_ESCAPES, shown_osc8, "ok\\r\\nERROR forged"):
        assert literal in show.stdout, literal
    assert "tool\\x07" in show.stdout
    assert '"tool": "[bold]rm[/bold]"' in show.stdout  # the pending action, as JSON
    assert '{"batch\\u001b[2J": 1}' in show.stdout  # cursors, as JSON
    assert f"history of {SHOWN_RUN_ID}" in history.stdout
    assert f"run {SHOWN_RUN_ID}: step 0 → step 1" in diff.stdout
    assert '"[/][link=https://evil.example]click' in diff.stdout
    assert f"+ assistant: {MARKUP} \\x1b]0;pwned" in diff.stdout
    assert f"{SHOWN_RUN_ID} step 1" in fork.stdout  # the parent row


def test_a_colour_terminal_still_gets_no_markup_and_no_hostile_escapes(hostile: str) -> None:
    """With rich believing it writes to a colour terminal, stored markup and escapes stay inert text."""
    for args in (["runs"], ["show", RUN_ID], ["history", RUN_ID], ["diff", RUN_ID, "0"]):
        result = safepoint_cli(*args, "--store", hostile, terminal=True)
        assert result.returncode == 0, result.stderr
        assert "\x1b[" in result.stdout  # rich did style its output: it believed in a terminal
        assert_safe(result, terminal=True)
        assert "\x1b]" not in result.stdout  # no window title, no OSC 8 hyperlink
        assert "\x07" not in result.stdout
        if args[0] in ("runs", "show"):
            assert "[link=https://evil.example]" in result.stdout
        if args[0] == "show":
            assert MARKUP in result.stdout
            assert ":thumbs_up:" in result.stdout  # not an emoji
            assert SHOWN_ESCAPES in result.stdout


def test_json_output_is_the_stored_data_with_no_raw_control_character(hostile: str) -> None:
    """`--json` prints equal JSON in which DEL, C1, bidi and zero-width characters are escaped too."""
    runs = safepoint_cli("runs", "--store", hostile, "--json")
    show = safepoint_cli("show", RUN_ID, "--store", hostile, "--json", "--step", "0")
    history = safepoint_cli("history", RUN_ID, "--store", hostile, "--json")
    diff = safepoint_cli("diff", RUN_ID, "0", "1", "--store", hostile, "--json")
    export = safepoint_cli("export", RUN_ID, "--store", hostile, "--step", "0")
    for result in (runs, show, history, diff, export):
        assert result.returncode == 0, result.stderr
        assert_safe(result)
    assert {r["run_id"] for r in json.loads(runs.stdout)["runs"]} == {RUN_ID, RUN_ID + "-fork"}
    shown: dict[str, Any] = json.loads(show.stdout)
    assert shown["run_id"] == RUN_ID
    assert [m["content"] for m in shown["messages"]][:4] == [MARKUP, ESCAPES, OSC8, FORGED]
    assert shown["labels"] == LABELS
    assert shown["pending_action"] == PENDING
    assert shown["state"] == {"markup": MARKUP, "escapes": ESCAPES}
    assert [h["step"] for h in json.loads(history.stdout)] == [0, 1]
    assert json.loads(diff.stdout)["messages"]["added"][0]["content"] == MARKUP + " " + ESCAPES
    exported = json.loads(export.stdout)["checkpoint"]
    assert exported["messages"] == shown["messages"]
    assert exported["state"] == shown["state"]
    for escaped in ("\\u202e", "\\u200b", "\\ufeff", "\\u009b", "\\u007f"):
        assert escaped in show.stdout
        assert escaped in export.stdout


def test_verify_names_a_hostile_run_escaped(hostile: str, tmp_path: Path) -> None:
    """A corrupt checkpoint of a hostile run: `verify` reports it with the run id made visible."""
    path = tmp_path / "corrupt.db"
    path.write_bytes(Path(hostile.removeprefix("sqlite:///")).read_bytes())
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE safepoint_checkpoints"
            " SET header = CAST(replace(CAST(header AS TEXT), 'running', 'runnin_') AS BLOB)"
            " WHERE step = 0 AND run_ref = (SELECT id FROM safepoint_runs WHERE run_id = ?)",
            (RUN_ID,),
        )
    url = f"sqlite:///{path}"
    table = safepoint_cli("verify", "--store", url)
    as_json = safepoint_cli("verify", "--store", url, "--json")
    for result in (table, as_json):
        assert result.returncode == 1
        assert_safe(result)
    assert "1 failed" in table.stdout
    assert "CorruptCheckpoint" in table.stdout
    failures = json.loads(as_json.stdout)["failures"]
    assert [(f["run_id"], f["step"]) for f in failures] == [(RUN_ID, 0)]


def test_check_and_migrate_show_a_failing_migration_escaped(hostile: str, tmp_path: Path) -> None:
    """A migration failing with hostile text: `check` and `migrate --dry-run` report it visibly."""
    (tmp_path / "hostile_chain.py").write_text(
        "from safepoint.migrations import MigrationChain\n"
        "def boom(cp):\n"
        "    raise ValueError('bad ' + cp['state']['escapes'] + ' [bold]x[/bold]\\nERROR forged')\n"
        "CHAIN = MigrationChain(current=2, migrations={1: boom})\n",
        encoding="utf-8",
    )
    options = ("--store", hostile, "--migrations", "hostile_chain:CHAIN")
    check = safepoint_cli("check", *options, cwd=tmp_path)
    check_json = safepoint_cli("check", *options, "--json", cwd=tmp_path)
    migrate = safepoint_cli("migrate", *options, "--dry-run", cwd=tmp_path)
    for result in (check, check_json, migrate):
        assert result.returncode == 1, result.stderr
        assert_safe(result)
        assert not any(line.startswith("ERROR forged") for line in result.stdout.splitlines())
    assert SHOWN_RUN_ID in check.stdout
    assert SHOWN_RUN_ID in migrate.stdout
    assert {f["run_id"] for f in json.loads(check_json.stdout)["failures"]} == {RUN_ID, RUN_ID + "-fork"}


def test_errors_on_stderr_show_hostile_arguments_escaped(hostile: str) -> None:
    """A missing hostile run, a hostile extra argument, a hostile option value: one visible line each."""
    missing = safepoint_cli("show", "gone" + ESCAPES, "--store", hostile)
    extra = safepoint_cli("show", RUN_ID, "x\x1b[2J\u202e", "--store", hostile)
    step = safepoint_cli("show", RUN_ID, "--step", "\x1b[2J", "--store", hostile)
    for result in (missing, extra, step):
        assert result.returncode != 0
        assert_safe(result)
    assert missing.stderr.startswith("error: ")
    assert len(missing.stderr.splitlines()) == 1
    assert "x\\x1b[2J\\u202e" in extra.stderr
    assert "\\x1b[2J" in step.stderr


def test_store_written_references_render_as_the_json_they_equal() -> None:
    """SecretRef, BlobLink and ScrubbedText print as their plain JSON, in tables and in --json."""
    digest = "ab" * 32
    data = {
        "key": SecretRef("API_KEY"),
        "blob": BlobLink(digest, 3, "text/plain"),
        "text": ScrubbedText("Bearer [SECRET:API_KEY|raw]\u202e", [(7, 27)]),
    }
    plain = {
        "key": {"$secret": "API_KEY"},
        "blob": {"$blob": {"sha256": digest, "size": 3, "media_type": "text/plain"}},
        "text": "Bearer [SECRET:API_KEY|raw]\u202e",
    }
    assert output.json_text(data) == output.json_text(plain)
    assert json.loads(output.json_text(data)) == plain
    assert output.shown(data["key"]) == '{"$secret": "API_KEY"}'
    assert output.shown(data["text"]) == "Bearer [SECRET:API_KEY|raw]\\u202e"
    assert output.pairs({"k": data["key"]}) == 'k={"$secret": "API_KEY"}'
