"""What the real ``safepoint`` executable prints: tool calls and results in show/diff/history, runs
for operators, errors as JSON, one exit code per kind of error, and gc's plain-words summary."""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

import safepoint
import safepoint_exe
from conftest_postgres import fresh_schema, require_postgres
from safepoint import Checkpoint, Retention, Run, Status
from safepoint.cli.output import ExitCode

ESC = "\x1b"


def sp(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real executable, with a terminal wide enough to keep table cells on one line."""
    return safepoint_exe.sp(folder, *args, columns=400)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    empty = tmp_path / "cwd"
    empty.mkdir()
    return empty


# One conversation in every shape users store (hostile text included: it must show escaped).
CONVERSATION = [
    {"role": "user", "content": "weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"},
    {"type": "function_call", "call_id": "fc_2", "name": "lookup_order", "arguments": '{"id":42}'},
    {"type": "function_call_output", "call_id": "fc_2", "output": "shipped"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Searching."},
            {"type": "tool_use", "id": "toolu_3", "name": "search", "input": {"q": f"evil{ESC}]0;pwned\x07"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_3", "content": [{"type": "text", "text": "3 hits"}]}
        ],
    },
    {
        "type": "ai",
        "data": {"content": "", "tool_calls": [{"name": "calculator", "args": {"x": 2}, "id": "lc_4"}]},
    },
    {"type": "tool", "data": {"content": "4", "tool_call_id": "lc_4"}},
]
SHOWN = [
    'call get_weather({"city":"Paris"}) [call_1]',
    "result [call_1] sunny, 21C",
    'call lookup_order({"id":42}) [fc_2]',
    "result [fc_2] shipped",
    "Searching. · call search(",
    "result [toolu_3] 3 hits",
    'call calculator({"x": 2}) [lc_4]',
    "result [lc_4] 4",
]


def test_show_diff_and_history_render_tool_calls_and_results(tmp_path: Path, folder: Path) -> None:
    """Every framework's tool calls and results show as calls and results, never null or ?; escapes show."""
    url = f"sqlite:///{tmp_path / 'tools.db'}"
    with safepoint.open_store(url) as store:
        cp = Checkpoint(run_id="agent")
        cp.messages.append(CONVERSATION[0])
        store.save(cp)
        cp = cp.next()
        cp.messages.extend(CONVERSATION[1:])
        cp.pending_action = {"kind": "action", "tool": "refund", "args": {"order": 42}, "key": "k" * 64}
        store.save(cp)
    show = sp(folder, "show", "agent", "--store", url)
    diff = sp(folder, "diff", "agent", "0", "--store", url)
    history = sp(folder, "history", "agent", "--store", url)
    for result in (show, diff, history):
        assert result.returncode == 0, result.stderr
        assert ESC not in result.stdout
    for text in SHOWN:
        assert text in show.stdout, text
        assert text in diff.stdout, text
    assert '"evil\\u001b]0;pwned\\u0007"' in show.stdout  # arguments as JSON: control characters escaped
    assert "null" not in show.stdout.split("last 9 of 9 messages")[1]
    assert "│ ? " not in show.stdout
    assert "+ tool call: call lookup_order" in diff.stdout
    assert 'action refund({"order": 42}) · in flight' in history.stdout
    assert 'action refund({"order": 42})' in show.stdout
    data = json.loads(sp(folder, "history", "agent", "--store", url, "--json").stdout)
    assert [step["pending_action"] for step in data] == [None, cp.pending_action]


def test_runs_shows_the_question_whole_ids_and_a_next_page_that_keeps_the_filters(
    tmp_path: Path, folder: Path
) -> None:
    """runs: a waiting run's question, a 255-character (hostile) id uncut, and a --cursor hint that works."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    long_id = "x" * 120 + ESC + "[2J" + "y" * 131
    with safepoint.open_store(url) as store:
        Run.start(store, "asking", labels={"team": "a b"}).wait_for_input("Approve the refund?")
        Run.start(store, long_id, labels={"team": "a b"}).wait_for_input("Ship it?")
        Run.start(store, "other", labels={"team": "c"}).wait_for_input("Not this team")
    first = sp(folder, "runs", "--status", "waiting", "--label", "team=a b", "--limit", "1", "--store", url)
    assert first.returncode == 0, first.stderr
    assert "x" * 120 + "\\x1b[2J" + "y" * 131 in first.stdout  # whole, escaped
    assert "Ship it?" in first.stdout
    hint = next(line for line in first.stdout.splitlines() if line.startswith("more: "))
    command = shlex.split(hint.removeprefix("more: "))
    assert command[:5] == ["safepoint", "runs", "--status=waiting", "--label=team=a b", "--limit=1"]
    rest = sp(folder, *command[1:], "--store", url, "--json")
    assert rest.returncode == 0, rest.stderr
    page = json.loads(rest.stdout)
    assert [(r["run_id"], r["question"]) for r in page["runs"]] == [("asking", "Approve the refund?")]
    assert page["next_cursor"] is None


def test_import_into_an_existing_run_says_so(tmp_path: Path, folder: Path) -> None:
    """import of a fixture whose run id exists: a conflict (6) that names the run and suggests --run-id."""
    url = f"sqlite:///{tmp_path / 'imp.db'}"
    with safepoint.open_store(url) as store:
        store.save(Checkpoint(run_id="prod-7"))
    fixture = tmp_path / "prod-7.json"
    assert sp(folder, "export", "prod-7", "-o", str(fixture), "--store", url).returncode == 0
    again = sp(folder, "import", str(fixture), "--store", url)
    assert again.returncode == ExitCode.CONFLICT
    assert "run 'prod-7' already exists" in again.stderr
    assert "--run-id" in again.stderr


def test_each_kind_of_error_has_its_exit_code_and_a_json_object(tmp_path: Path, folder: Path) -> None:
    """Usage 2, not found 3, corrupt 4, store unavailable 5, conflict 6, else 1; with --json: an object."""
    url = f"sqlite:///{tmp_path / 'codes.db'}"
    with safepoint.open_store(url) as store:
        cp = Checkpoint(run_id="damaged")
        cp.messages.append({"role": "user", "content": "SECRET-MARKER-7f3a"})
        store.save(cp)
        store.save(Checkpoint(run_id="busy"))
    with safepoint.open_store(url, schema_version=2) as newer:
        waiting = {"kind": "input", "question": "?"}
        newer.save(
            Checkpoint(run_id="newer", schema_version=2, status=Status.WAITING, pending_action=waiting)
        )
    with closing(sqlite3.connect(tmp_path / "codes.db")) as conn, conn:
        conn.execute("UPDATE safepoint_checkpoints SET digest = zeroblob(32) WHERE run_ref = 1")
    cases = [
        (ExitCode.USAGE, ("runs", "--limit", "0"), "InvalidArgument", None),
        (ExitCode.USAGE, ("show", "damaged", "--no-such-option"), "NoSuchOption", None),
        (ExitCode.NOT_FOUND, ("show", "absent"), "NotFound", "absent"),
        (ExitCode.CORRUPT, ("show", "damaged"), "CorruptCheckpoint", "damaged"),
        (ExitCode.CONFLICT, ("answer", "busy", "hello"), "RunStatusError", "busy"),
        (ExitCode.FAILURE, ("answer", "newer", "hello"), "SchemaTooNew", "newer"),
    ]
    for code, args, kind, run_id in cases:
        result = sp(folder, *args, "--store", url, "--json")
        assert result.returncode == code, (args, result.stderr)
        error = json.loads(result.stderr)
        assert set(error) == {"error", "type", "run_id", "step"}
        assert (error["type"], error["run_id"]) == (kind, run_id), args
        assert "SECRET-MARKER" not in result.stderr
        assert result.stdout == ""
    corrupt = json.loads(sp(folder, "show", "damaged", "--store", url, "--json").stderr)
    assert corrupt["step"] == 0
    plain = sp(folder, "show", "damaged", "--store", url)
    assert plain.returncode == ExitCode.CORRUPT
    assert plain.stderr.startswith("error: run 'damaged' step 0 is corrupt")
    assert len(plain.stderr.splitlines()) == 1
    down = sp(folder, "runs", "--store", "postgresql://postgres@127.0.0.1:1/none", "--json")
    assert down.returncode == ExitCode.UNAVAILABLE
    assert json.loads(down.stderr)["type"] in ("StoreError", "StoreUnavailable")


def _fill(url: str, runs: int, done: int) -> None:
    """``runs`` runs of 6 steps, the first ``done`` of them finished."""
    with safepoint.open_store(url) as store:
        for n in range(runs):
            cp = Checkpoint(run_id=f"r{n}")
            for step in range(6):
                cp.messages.append({"role": "tool", "content": os.urandom(3000).hex()})
                cp.status = Status.DONE if step == 5 and n < done else Status.RUNNING
                store.save(cp)
                cp = cp.next()


def test_gc_says_what_it_freed_and_the_sqlite_file_shrinks(tmp_path: Path, folder: Path) -> None:
    """gc: pruned, deleted, bytes freed in plain words (a dry run changes nothing); the file shrinks."""
    path = tmp_path / "gc.db"
    url = f"sqlite:///{path}"
    _fill(url, 8, done=6)
    before = path.stat().st_size
    retention = ("--keep-last", "1", "--delete-finished-after", "0s")
    dry = sp(folder, "gc", *retention, "--dry-run", "--store", url)
    assert dry.returncode == 0, dry.stderr
    assert "would prune 10 checkpoints" in dry.stdout
    assert "would delete 6 finished runs whole" in dry.stdout
    assert path.stat().st_size == before
    done = sp(folder, "gc", *retention, "--store", url)
    assert done.returncode == 0, done.stderr
    assert "pruned 10 checkpoints" in done.stdout
    assert "deleted 6 finished runs whole" in done.stdout
    assert "given back to the disk" in done.stdout
    assert path.stat().st_size < before / 2
    with safepoint.open_store(url) as store:
        assert [i.step for i in store.history("r7")] == [5]
        assert [r.run_id for r in store.runs()] == ["r7", "r6"]


def test_gc_vacuum_warns_first_and_shrinks_an_older_file(tmp_path: Path, folder: Path) -> None:
    """A file made without incremental auto-vacuum keeps its pages; gc --vacuum warns, then shrinks it."""
    path = tmp_path / "old.db"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("PRAGMA auto_vacuum = NONE")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE unrelated (x)")
    url = f"sqlite:///{path}"
    _fill(url, 8, done=6)
    kept = sp(folder, "gc", "--delete-finished-after", "0s", "--store", url, "--json")
    assert kept.returncode == 0, kept.stderr
    space = json.loads(kept.stdout)["database"]
    assert space["reclaims"] is False
    assert space["free_bytes"] > 0
    size = path.stat().st_size
    vacuumed = sp(folder, "gc", "--vacuum", "--store", url)
    assert vacuumed.returncode == 0, vacuumed.stderr
    assert "needs the store to itself" in vacuumed.stderr
    assert "free disk space" in vacuumed.stderr
    assert path.stat().st_size < size / 2


def test_gc_dry_run_works_on_postgresql(folder: Path) -> None:
    """gc --dry-run on PostgreSQL reports and changes nothing (it failed in its read-only transaction)."""
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        url = f"{dsn}?schema={schema}"
        with safepoint.open_store(url) as store:
            cp = Checkpoint(run_id="long")
            for _ in range(3):
                store.save(cp)
                cp = cp.next()
            store.set_retention("long", Retention(keep_last=1))
        dry = sp(folder, "gc", "--dry-run", "--store", url, "--json")
        assert dry.returncode == 0, dry.stderr
        data = json.loads(dry.stdout)
        assert (data["dry_run"], data["checkpoints_pruned"], data["database"]) == (True, 2, None)
        vacuum = sp(folder, "gc", "--vacuum", "--store", url)
        assert vacuum.returncode == ExitCode.USAGE
        with safepoint.open_store(url) as store:
            assert len(store.history("long")) == 3


@pytest.mark.parametrize(
    ("message", "role", "text"),
    [
        ({"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}, "assistant", "call f({})"),
        ({"role": "tool", "content": [{"type": "text", "text": "ok"}]}, "tool", "result ok"),
        ({"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]}, "reasoning", "think"),
        ({"type": "web_search_call", "id": "ws", "status": "completed"}, "web search call", '"id": "ws"'),
        (
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]},
            "assistant",
            "hi",
        ),
        (
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": True, "content": "boom"}],
            },
            "user",
            "error result [t] boom",
        ),
        (
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"}]},
            "assistant",
            "(thinking) hmm",
        ),
        ({"content": "no role", "type": "human"}, "user", "no role"),
        ({"role": "assistant", "content": None}, "assistant", "(no content)"),
        (
            {"role": "assistant", "content": None, "refusal": None, "audio": {"id": "a"}},
            "assistant",
            '"audio"',
        ),
        ("a bare string", "-", '"a bare string"'),
        ({"role": "user", "content": {"unexpected": [1, 2]}}, "user", '{"unexpected": [1, 2]}'),
    ],
)
def test_describe_knows_the_shapes_users_store(message: object, role: str, text: str) -> None:
    """readable.describe: a role and a line for each shape, never None, null or ?."""
    from safepoint.readable import describe  # noqa: PLC0415  # the function under test, by itself

    shown_role, shown_text = describe(message)
    assert shown_role == role
    assert text in shown_text
    assert shown_text not in ("", "null", "?")


def test_every_command_and_exit_code_is_in_the_cli_docs() -> None:
    """docs/cli.md names every subcommand and documents every exit code."""
    from safepoint.cli import main  # noqa: PLC0415

    docs = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    for name in main.list_commands(None):  # type: ignore[arg-type]
        assert f"safepoint {name}" in docs, name
    for code in ExitCode:
        assert f"| {int(code)} |" in docs, code
