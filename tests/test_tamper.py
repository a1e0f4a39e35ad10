"""Damaged and tampered data: typed errors naming run and step (or the file), one line in the CLI.

A corrupt page, a file that is not a database, an undecodable column, a
truncated WAL, a run's head moved back or its head row deleted (PostgreSQL),
and each listed column outside the digest altered. Every case plants a
marker in the stored text and checks it never reaches an error message;
the real ``safepoint`` executable prints one line (or verify's report) and
exits with the corrupt code, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import safepoint
import safepoint_exe
from conftest_postgres import fresh_schema, raw, require_postgres
from safepoint import Checkpoint, CorruptCheckpoint, NotFound, Retention, SafepointError, StoreCorrupt
from safepoint.cli.output import ExitCode
from safepoint.tamper import checkpoint_mismatches, run_mismatches

MARKER = "TAMPER-MARKER-5e1d"
STEPS = 4


def sp(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real executable, with a terminal wide enough to keep table cells on one line."""
    return safepoint_exe.sp(folder, *args, columns=300)


def one_line(result: subprocess.CompletedProcess[str], code: ExitCode = ExitCode.CORRUPT) -> str:
    """The command failed with ``code``, printing one line and no traceback or stored text."""
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    assert MARKER not in result.stderr + result.stdout
    assert len(result.stderr.splitlines()) == 1, result.stderr
    return result.stderr


def fill(url: str, steps: int = STEPS, size: int = 200) -> None:
    """Run "r" of ``steps`` steps, each adding a message that holds the marker."""
    with safepoint.open_store(url) as store:
        save_steps(store, steps, size)


def save_steps(store: safepoint.Store, steps: int, size: int) -> None:
    cp = Checkpoint(run_id="r", labels={"team": MARKER}, counters={"tokens": 1})
    for i in range(steps):
        cp.messages.append({"role": "user", "content": f"{MARKER} {i} " + "x" * size})
        cp.state["note"] = MARKER
        store.save(cp)
        cp = cp.next()


def no_marker(exc: BaseException) -> str:
    assert MARKER not in str(exc)
    return str(exc)


def verify_json(cwd: Path, url: str) -> list[dict[str, Any]]:
    result = sp(cwd, "verify", "--store", url, "--json")
    assert "Traceback" not in result.stderr
    assert MARKER not in result.stdout + result.stderr
    assert result.returncode == ExitCode.FAILURE, result.stderr
    failures: list[dict[str, Any]] = json.loads(result.stdout)["failures"]
    return failures


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    folder = tmp_path / "cwd"
    folder.mkdir()
    return folder


# -- SQLite: damage below the checkpoints --------------------------------------------------------


def test_a_corrupt_page_is_store_corrupt_naming_the_file(tmp_path: Path, cwd: Path) -> None:
    path = tmp_path / "big.db"
    fill(f"sqlite:///{path}", steps=40, size=3000)  # ~70 pages of 4 KiB
    size = path.stat().st_size
    assert size > 40 * 4096
    assert not Path(f"{path}-wal").exists()
    with path.open("r+b") as f:  # a bad disk: every page of the middle half overwritten in part
        for page in range(size // 4096 // 4, size // 4096 * 3 // 4):
            f.seek(page * 4096 + 16)
            f.write(b"\xa5" * 1200)
    url = f"sqlite:///{path}"
    refused = ""
    try:
        store: Any = safepoint.open_store(url, read_only=True)
    except StoreCorrupt as exc:  # the damage reached the schema itself: the open says so
        store, refused = None, no_marker(exc)
    if store is None:
        assert str(path) in refused
    else:
        with store:
            with pytest.raises((StoreCorrupt, CorruptCheckpoint)) as caught:
                store.load("r")
            message = no_marker(caught.value)
            if isinstance(caught.value, StoreCorrupt):
                assert str(path) in message
            else:
                assert caught.value.run_id == "r"
            for call in (lambda: store.history("r"), store.runs, lambda: store.load("r", 0)):
                try:
                    call()
                # NotFound: a damaged page SQLite does not notice can lose the run's row from a lookup.
                except (StoreCorrupt, CorruptCheckpoint, NotFound) as exc:
                    no_marker(exc)
    one_line(sp(cwd, "show", "r", "--store", url))
    for command in (("verify",),):
        result = sp(cwd, *command, "--store", url)
        assert result.returncode in (ExitCode.OK, ExitCode.FAILURE, ExitCode.CORRUPT), result.stderr
        assert "Traceback" not in result.stderr
        assert MARKER not in result.stderr


def test_a_file_that_is_not_a_database_is_store_corrupt(tmp_path: Path, cwd: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(MARKER.encode() * 400)
    for read_only in (True, False):
        with pytest.raises(StoreCorrupt) as caught:
            safepoint.open_store(f"sqlite:///{path}", read_only=read_only)
        assert str(path) in no_marker(caught.value)
    line = one_line(sp(cwd, "runs", "--store", f"sqlite:///{path}"))
    assert "corrupt" in line
    assert "not a database" in line


def test_a_truncated_wal_loads_an_earlier_state_or_fails_typed(tmp_path: Path, cwd: Path) -> None:
    """A WAL cut anywhere (after its frames were copied back) is never a traceback; SQLite drops
    the frames after the last whole commit, so what remains looks like saves that never happened
    (the limit docs/operations.md states)."""
    path = tmp_path / "w.db"
    url = f"sqlite:///{path}"
    with safepoint.open_store(url) as store:  # an open store keeps its WAL
        save_steps(store, 12, 3000)
        with closing(sqlite3.connect(path)) as other:  # copied back, not reset
            other.execute("PRAGMA wal_checkpoint(PASSIVE)")
        wal = Path(f"{path}-wal").read_bytes()
        assert len(wal) > 3 * 4096
        for cut in (len(wal) // 10, len(wal) - 100):
            copy = tmp_path / f"cut{cut}"
            copy.mkdir()
            shutil.copy(path, copy / "w.db")
            (copy / "w.db-wal").write_bytes(wal[:cut])
            copy_url = f"sqlite:///{copy / 'w.db'}"
            with safepoint.open_store(copy_url, read_only=True) as damaged:
                try:
                    loaded = damaged.load("r")
                    assert loaded.step <= 12
                except SafepointError as exc:  # NotFound when the cut precedes the run's row
                    no_marker(exc)
            for command in (("show", "r"), ("verify",)):
                result = sp(cwd, *command, "--store", copy_url)
                assert "Traceback" not in result.stderr, command
                assert MARKER not in result.stderr, command


# -- SQLite: undecodable columns ------------------------------------------------------------------

SQLITE_DAMAGE = {
    # what: (statement, the call that reads it, the step it damages)
    "ranges not JSON": (f"UPDATE safepoint_checkpoints SET ranges = '[{MARKER}' WHERE step = 2", "load", 2),
    "ranges huge": (
        "UPDATE safepoint_checkpoints SET ranges = '[[0, 1000000000000]]' WHERE step = 1",
        "load",
        1,
    ),
    "messages as text": (f"UPDATE safepoint_checkpoints SET messages = '{MARKER}' WHERE step = 1", "load", 1),
    "header": (
        f"UPDATE safepoint_checkpoints SET header = CAST('{MARKER}' AS BLOB) WHERE step = 2",
        "load",
        2,
    ),
    "status unknown": (f"UPDATE safepoint_checkpoints SET status = '{MARKER}' WHERE step = 1", "history", 1),
    "created_at text": (
        f"UPDATE safepoint_checkpoints SET created_at = '{MARKER}' WHERE step = 1",
        "history",
        1,
    ),
    # Read by run(); a listing shows the run as unreadable instead (tests/test_seams_integrity.py).
    "labels not JSON": (f"UPDATE safepoint_runs SET labels = '{{{MARKER}'", "run", 2),
}


@pytest.mark.parametrize("damage", list(SQLITE_DAMAGE))
def test_an_undecodable_column_is_corrupt_checkpoint_naming_run_and_step(
    damage: str, tmp_path: Path, cwd: Path
) -> None:
    path = tmp_path / "u.db"
    url = f"sqlite:///{path}"
    fill(url, steps=3)
    statement, reader, step = SQLITE_DAMAGE[damage]
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(statement)
    with safepoint.open_store(url, read_only=True) as store:
        calls = {
            "load": lambda: store.load("r", step),
            "history": lambda: store.history("r"),
            "run": lambda: store.run("r"),
        }
        with pytest.raises(CorruptCheckpoint) as caught:
            calls[reader]()
    no_marker(caught.value)
    assert (caught.value.run_id, caught.value.step) == ("r", step)
    if reader == "run":
        listed = sp(cwd, "runs", "--store", url)
        assert listed.returncode == 0
        assert "unreadable" in listed.stdout
        assert MARKER not in listed.stdout
        return
    command = {"load": ("show", "r", "--step", str(step)), "history": ("history", "r")}[reader]
    line = one_line(sp(cwd, *command, "--store", url))
    assert "'r'" in line
    assert "corrupt" in line


# -- columns outside the digest, altered to values a save could write ------------------------------

# (table, column, new value as SQL, what verify names)
OUTSIDE_DIGEST_SQLITE = [
    ("safepoint_checkpoints", "status", "'done'", "status"),
    ("safepoint_checkpoints", "message_count", "99", "message count"),
    ("safepoint_checkpoints", "schema_version", "7", "schema_version"),
    ("safepoint_checkpoints", "created_at", "created_at + 1", "created_at"),
    ("safepoint_runs", "labels", '\'{"team":"other"}\'', "labels"),
]


@pytest.mark.parametrize(
    "case", OUTSIDE_DIGEST_SQLITE, ids=[f"{t}.{c}" for t, c, _, _ in OUTSIDE_DIGEST_SQLITE]
)
def test_sqlite_verify_reports_each_column_outside_the_digest(
    case: tuple[str, str, str, str], tmp_path: Path, cwd: Path
) -> None:
    table, column, value, named = case
    path = tmp_path / "c.db"
    url = f"sqlite:///{path}"
    fill(url)
    head = STEPS - 1
    where = f" WHERE step = {head}" if table == "safepoint_checkpoints" else ""
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(f"UPDATE {table} SET {column} = {value}{where}")  # test SQL
    with safepoint.open_store(url, read_only=True) as store:
        loaded = store.load("r")  # the header is intact: the load is right
        mismatched = checkpoint_mismatches(store.history("r")[head], loaded)
        mismatched += run_mismatches(store.run("r"), loaded)
    assert named in mismatched
    failures = verify_json(cwd, url)
    assert {(f["run_id"], f["step"], f["error"]) for f in failures} == {("r", head, "CorruptCheckpoint")}
    assert any(named in f["message"] for f in failures)


def test_sqlite_head_row_deleted_looks_like_saves_that_never_happened(tmp_path: Path) -> None:
    """The documented limit: on SQLite the head is the highest checkpoint row."""
    path = tmp_path / "h.db"
    url = f"sqlite:///{path}"
    fill(url)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(f"DELETE FROM safepoint_checkpoints WHERE step = {STEPS - 1}")
    with safepoint.open_store(url, read_only=True) as store:
        assert store.load("r").step == STEPS - 2


# -- PostgreSQL --------------------------------------------------------------------------------------


@pytest.fixture
def pg() -> Iterator[tuple[str, str, str]]:
    """(dsn, schema, url) of a fresh schema holding run "r"."""
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        url = f"{dsn}?schema={schema}"
        fill(url)
        yield dsn, schema, url


def test_postgres_head_moved_back_is_corrupt_on_load_and_verify(pg: tuple[str, str, str], cwd: Path) -> None:
    dsn, schema, url = pg
    raw(
        dsn,
        schema,
        "UPDATE safepoint_runs SET head_step = 1,"
        " head_digest = (SELECT digest FROM safepoint_checkpoints WHERE step = 1)",
    )
    with safepoint.open_store(url, read_only=True) as store:
        with pytest.raises(CorruptCheckpoint) as caught:
            store.load("r")
        assert (caught.value.run_id, caught.value.step) == ("r", STEPS - 1)
        assert "head" in no_marker(caught.value)
        assert store.load("r", 1).step == 1  # a step asked for by number still loads
    one_line(sp(cwd, "show", "r", "--store", url))
    failures = verify_json(cwd, url)
    assert [(f["run_id"], f["step"]) for f in failures] == [("r", STEPS - 1)]
    raw(dsn, schema, f"UPDATE safepoint_runs SET head_step = {STEPS - 1}")  # step back, digest still old
    with safepoint.open_store(url, read_only=True) as store, pytest.raises(CorruptCheckpoint) as caught:
        store.load("r")
    assert "digest" in no_marker(caught.value)


def test_postgres_head_row_deleted_is_corrupt_not_not_found(pg: tuple[str, str, str], cwd: Path) -> None:
    dsn, schema, url = pg
    raw(dsn, schema, f"DELETE FROM safepoint_checkpoints WHERE step = {STEPS - 1}")
    with safepoint.open_store(url, read_only=True) as store:
        with pytest.raises(CorruptCheckpoint) as caught:
            store.load("r")
        assert (caught.value.run_id, caught.value.step) == ("r", STEPS - 1)
        assert "missing" in no_marker(caught.value)
    line = one_line(sp(cwd, "show", "r", "--store", url))
    assert "missing" in line
    assert [(f["run_id"], f["step"]) for f in verify_json(cwd, url)] == [("r", STEPS - 1)]


OUTSIDE_DIGEST_POSTGRES = [
    ("safepoint_checkpoints", "status", "'done'", "status"),
    ("safepoint_checkpoints", "message_count", "99", "message count"),
    ("safepoint_checkpoints", "schema_version", "7", "schema_version"),
    ("safepoint_checkpoints", "created_at", "created_at + interval '1 second'", "created_at"),
    ("safepoint_runs", "labels", '\'{"team": "other"}\'::jsonb', "labels"),
    ("safepoint_runs", "counters", "'{\"tokens\": 999}'::jsonb", "counters"),
    ("safepoint_runs", "schema_version", "7", "schema_version"),
]


@pytest.mark.parametrize(
    "case", OUTSIDE_DIGEST_POSTGRES, ids=[f"{t}.{c}" for t, c, _, _ in OUTSIDE_DIGEST_POSTGRES]
)
def test_postgres_verify_reports_each_column_outside_the_digest(
    case: tuple[str, str, str, str], pg: tuple[str, str, str], cwd: Path
) -> None:
    table, column, value, named = case
    dsn, schema, url = pg
    head = STEPS - 1
    where = f" WHERE step = {head}" if table == "safepoint_checkpoints" else ""
    raw(dsn, schema, f"UPDATE {table} SET {column} = {value}{where}")  # test SQL
    with safepoint.open_store(url, read_only=True) as store:
        loaded = store.load("r")
        mismatched = checkpoint_mismatches(store.history("r")[head], loaded)
        mismatched += run_mismatches(store.run("r"), loaded)
    assert named in mismatched
    failures = verify_json(cwd, url)
    assert {(f["run_id"], f["step"], f["error"]) for f in failures} == {("r", head, "CorruptCheckpoint")}
    assert any(named in f["message"] for f in failures)


def test_postgres_undecodable_status_is_corrupt_checkpoint(pg: tuple[str, str, str], cwd: Path) -> None:
    dsn, schema, url = pg
    raw(dsn, schema, f"UPDATE safepoint_checkpoints SET status = '{MARKER}' WHERE step = 1")
    raw(dsn, schema, f"UPDATE safepoint_runs SET status = '{MARKER}'")
    with safepoint.open_store(url, read_only=True) as store:
        with pytest.raises(CorruptCheckpoint) as caught:
            store.history("r")
        assert (caught.value.run_id, caught.value.step) == ("r", 1)
        no_marker(caught.value)
        with pytest.raises(CorruptCheckpoint) as read:
            store.run("r")
        assert (read.value.run_id, read.value.step) == ("r", STEPS - 1)
        no_marker(read.value)
        # Listing is not loading: the run is listed as unreadable, by its id alone.
        (listed,) = store.runs()
        assert (listed.run_id, listed.unreadable) == ("r", "CorruptCheckpoint")
    one_line(sp(cwd, "history", "r", "--store", url))
    shown = sp(cwd, "runs", "--store", url)
    assert shown.returncode == 0
    assert "unreadable" in shown.stdout
    assert MARKER not in shown.stdout


# -- the pruned flag: a live checkpoint hidden by hand -------------------------------------------


def test_sqlite_a_live_checkpoint_flagged_pruned_is_reported_by_verify(tmp_path: Path, cwd: Path) -> None:
    """Retention empties what it prunes; a full row flagged pruned hides a checkpoint: verify names it."""
    path = tmp_path / "p.db"
    url = f"sqlite:///{path}"
    fill(url)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE safepoint_checkpoints SET pruned = 1 WHERE step = 1")  # test SQL
    with safepoint.open_store(url, read_only=True) as store:
        assert 1 not in [info.step for info in store.history("r")]  # hidden from the listing
        assert store.hidden_steps("r") == [1]
    failures = verify_json(cwd, url)
    assert ("r", 1, "CorruptCheckpoint") in {(f["run_id"], f["step"], f["error"]) for f in failures}


def test_postgres_a_live_checkpoint_flagged_pruned_is_reported_by_verify(
    pg: tuple[str, str, str], cwd: Path
) -> None:
    dsn, schema, url = pg
    raw(dsn, schema, "UPDATE safepoint_checkpoints SET pruned = true WHERE step = 1")  # test SQL

    async def hidden() -> list[int]:
        store = await safepoint.open_async_store(url, read_only=True)
        try:
            return await store.hidden_steps("r")
        finally:
            await store.close()

    assert asyncio.run(hidden()) == [1]
    failures = verify_json(cwd, url)
    assert ("r", 1, "CorruptCheckpoint") in {(f["run_id"], f["step"], f["error"]) for f in failures}


def test_a_store_pruned_by_retention_hides_nothing(tmp_path: Path) -> None:
    """What retention really prunes is an emptied row: ``hidden_steps`` stays empty."""
    url = f"sqlite:///{tmp_path / 'kept.db'}"
    fill(url)
    with safepoint.open_store(url) as store:
        result = store.prune_run("r", Retention(keep_last=1))
        assert result.pruned_steps
        assert store.hidden_steps("r") == []


@pytest.mark.parametrize("change", ["parent_step = 0", "parent_run_id = 'elsewhere'", "parent_run_id = NULL"])
def test_sqlite_verify_reports_a_run_rows_parent_changed(change: str, tmp_path: Path, cwd: Path) -> None:
    """A fork stores its parent in its first checkpoint; the run row's copy (``runs --json``) must match."""
    path = tmp_path / "f.db"
    url = f"sqlite:///{path}"
    fill(url)
    with safepoint.open_store(url) as store:
        store.fork("r", 2, new_run_id="child")
    assert verify_json_ok(cwd, url)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(f"UPDATE safepoint_runs SET {change} WHERE run_id = 'child'")  # test SQL
    failures = verify_json(cwd, url)
    assert {(f["run_id"], f["error"]) for f in failures} == {("child", "CorruptCheckpoint")}
    assert all("parent" in f["message"] for f in failures)


def verify_json_ok(cwd: Path, url: str) -> bool:
    result = sp(cwd, "verify", "--store", url, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)["failures"] == []
