"""Commands that look never change anything (DESIGN invariant 10), the way operators run them.

The real ``safepoint`` executable runs in a subprocess against real SQLite
files and a real PostgreSQL server: from a folder with no store (every read
command exits with the not-found code and the folder stays byte-for-byte the
same), on a fresh PostgreSQL database (no schema appears), as an unprivileged
uid with only read access to a SQLite file (and to its folder: an immutable
snapshot), as a PostgreSQL role that may only SELECT, with near-miss URLs,
and choosing a PostgreSQL schema by ``--schema``, ``?schema=`` and
``SAFEPOINT_SCHEMA``.

Permission tests need a uid without root's powers: the development and CI
machines run as root, where every permission check passes, so the commands
run under ``setpriv`` as ``nobody`` with the system's Python of the same
version (root's own interpreter is not readable by other users) importing
this checkout's packages.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

import safepoint
from conftest_postgres import fresh_schema
from safepoint import Checkpoint, InvalidURL, StoreNotFound
from safepoint.cli.output import ExitCode
from safepoint.store.urls import scheme_of, split_schema

SAFEPOINT = str(Path(sys.executable).parent / "safepoint")  # the installed console script
# What a read command gets for "the run": ``r`` has steps 0 and 1.
READ_COMMANDS: list[tuple[str, ...]] = [
    ("runs",),
    ("show", "r"),
    ("history", "r"),
    ("diff", "r", "0", "1"),
    ("verify",),
    ("export", "r"),
    ("check", "--migrations", "app:CHAIN"),
    ("stats",),
]
APP = "from safepoint import MigrationChain\n\nCHAIN = MigrationChain(current=1)\n"
# Imported where a store is missing, it would leave a trace (and a __pycache__) in the folder.
TRACED_APP = 'open("app-was-imported", "w").close()\n' + APP
PASSWORD = "pw-not-checked-by-trust"
_ENV_NAMES = ("SAFEPOINT_STORE", "SAFEPOINT_SCHEMA", "SAFEPOINT_MIGRATIONS")


def safepoint_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, prefix: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the safepoint executable with ``args`` in ``cwd``, none of its variables inherited."""
    environment = {k: v for k, v in os.environ.items() if k not in _ENV_NAMES} | (env or {})
    command = [*(prefix or []), SAFEPOINT, *args]
    return subprocess.run(
        command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=60, check=False
    )


def each(
    commands: list[tuple[str, ...]], *extra: str, **options: Any
) -> list[tuple[tuple[str, ...], subprocess.CompletedProcess[str]]]:
    """``safepoint_cli(*command, *extra, **options)`` for every command, a few at a time; in order."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda command: safepoint_cli(*command, *extra, **options), commands))
    return list(zip(commands, results, strict=True))


def tree(root: Path) -> dict[str, tuple[int, int, int, str]]:
    """Every entry under ``root``, ``root`` included: mode, size, mtime and (files) a digest of the bytes."""
    entries = {}
    for path in [root, *sorted(root.rglob("*"))]:
        status = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        entries[str(path.relative_to(root))] = (status.st_mode, status.st_size, status.st_mtime_ns, digest)
    return entries


def two_steps(store: safepoint.Store, run_id: str = "r") -> None:
    cp = Checkpoint(run_id=run_id, messages=[{"role": "user", "content": "hi"}], state={"n": 0})
    store.save(cp)
    cp = cp.next()
    cp.messages.append({"role": "assistant", "content": "hello"})
    cp.state["n"] = 1
    store.save(cp)


def assert_ok(result: subprocess.CompletedProcess[str], command: tuple[str, ...]) -> None:
    assert result.returncode == 0, (command, result.stderr)
    assert "Traceback" not in result.stderr, (command, result.stderr)


# -- SQLite -------------------------------------------------------------------


def test_every_read_command_in_a_folder_without_a_store_exits_not_found_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """No .safepoint folder, no file, no __pycache__: `no safepoint store at …` and the not-found code."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "app.py").write_text(TRACED_APP)
    before = tree(folder)
    for command, result in each(READ_COMMANDS, cwd=folder):
        assert result.returncode == ExitCode.NOT_FOUND, (command, result.stderr)
        assert result.stderr.startswith("error: no safepoint store at sqlite:///.safepoint/state.db"), command
        assert str(folder / ".safepoint" / "state.db") in result.stderr  # where it looked, in full
        assert "Traceback" not in result.stderr
    # An explicit URL into folders that do not exist either, with --json.
    result = safepoint_cli("runs", "--json", "--store", "sqlite:///deep/er/x.db", cwd=folder)
    assert result.returncode == ExitCode.NOT_FOUND, result.stderr
    assert tree(folder) == before


def test_a_sqlite_file_without_safepoints_tables_is_said_and_left_alone(tmp_path: Path) -> None:
    """A database of something else: the read command says so and adds no table (the file is unchanged)."""
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    before = tree(tmp_path)
    result = safepoint_cli("show", "r", "--store", f"sqlite:///{other}", cwd=tmp_path)
    assert result.returncode == ExitCode.NOT_FOUND, result.stderr
    assert "a SQLite file without safepoint's tables" in result.stderr
    after = tree(tmp_path)
    side_files = {"other.db-wal", "other.db-shm", "."}
    assert {k: v for k, v in after.items() if k not in side_files} == {
        k: v for k, v in before.items() if k not in side_files
    }


def test_read_commands_on_a_store_leave_it_unchanged_beside_the_wal_files(tmp_path: Path) -> None:
    """With a store in the folder, every read command works; only SQLite's -wal and -shm may appear.

    ``check`` imports the application's module from the folder without
    writing its bytecode there.
    """
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "app.py").write_text(APP)
    with safepoint.open_store(f"sqlite:///{folder / 'state.db'}") as store:
        two_steps(store)
    before = tree(folder)
    for command, result in each(READ_COMMANDS, "--store", "sqlite:///state.db", cwd=folder):
        assert_ok(result, command)
    after = tree(folder)
    assert set(after) - set(before) <= {"state.db-wal", "state.db-shm"}
    assert {k: after[k] for k in before if k != "."} == {k: v for k, v in before.items() if k != "."}


# -- an unprivileged uid --------------------------------------------------------


def _unprivileged() -> list[str]:
    """The command prefix that runs a command as ``nobody`` with a Python that ``nobody`` can read."""
    if os.geteuid() != 0:
        return [sys.executable]  # already unprivileged: the file modes bind this process
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system_python = shutil.which(minor, path="/usr/bin:/usr/local/bin:/bin")
    setpriv = shutil.which("setpriv")
    if system_python is None or setpriv is None:
        reason = f"running as root needs setpriv and a system {minor} to run as an unprivileged uid"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the permission tests must run, not skip)", pytrace=False)
        pytest.skip(reason)
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", system_python]


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder other uids can enter (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="sp-readonly-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in [folder, *folder.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(folder)


@pytest.fixture
def as_nobody(shared_folder: Path) -> list[str]:
    """Run the executable as ``nobody``: a Python seeing this checkout's packages, then the script."""
    prefix = _unprivileged()
    if prefix == [sys.executable]:
        return prefix
    venv = shared_folder / "venv"
    subprocess.run([prefix[-1], "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = next(Path(p) for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    site_dir = next((venv / "lib").glob("python*/site-packages"))
    (site_dir / "safepoint_checkout.pth").write_text(f"import site; site.addsitedir({str(site)!r})\n")
    for path in [venv, *venv.rglob("*")]:
        path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    return [*prefix[:-1], str(venv / "bin" / "python")]


def _read_only_store(folder: Path) -> Path:
    """A store with run ``r`` in ``folder``, its file mode 0444 and its WAL folded in (no side files)."""
    folder.mkdir()
    db = folder / "state.db"
    with safepoint.open_store(f"sqlite:///{db}") as store:
        two_steps(store)
    assert not (folder / "state.db-wal").exists()
    db.chmod(0o444)
    return db


def test_a_read_only_file_serves_every_read_command_to_an_unprivileged_uid(
    shared_folder: Path, as_nobody: list[str]
) -> None:
    """Mode 0444, owned by someone else: every read command works; SQLite adds only -wal and -shm."""
    work = shared_folder / "work"
    work.mkdir()
    (work / "app.py").write_text(APP)
    db = _read_only_store(shared_folder / "writable")
    (shared_folder / "writable").chmod(0o777)  # the folder allows the side files
    before = tree(db.parent)
    for command, result in each(READ_COMMANDS, "--store", f"sqlite:///{db}", cwd=work, prefix=as_nobody):
        assert_ok(result, command)
        assert "snapshot" not in result.stderr
    if os.geteuid() == 0:  # the side files are nobody's: the commands did run as that uid
        assert (db.parent / "state.db-shm").stat().st_uid == 65534
    # A write as that uid fails in one line: the file is not theirs to change.
    exported = safepoint_cli("export", "r", "--store", f"sqlite:///{db}", cwd=work)
    (work / "r.json").write_text(exported.stdout)
    result = safepoint_cli(
        "import", "r.json", "--run-id", "copy", "--store", f"sqlite:///{db}", cwd=work, prefix=as_nobody
    )
    assert result.returncode != 0
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr
    after = tree(db.parent)
    assert set(after) - set(before) <= {"state.db-wal", "state.db-shm"}
    assert after["state.db"] == before["state.db"]


def test_a_read_only_folder_is_read_as_an_immutable_snapshot(
    shared_folder: Path, as_nobody: list[str]
) -> None:
    """No write access to the folder either: every read command works on a snapshot, and says so."""
    work = shared_folder / "work"
    work.mkdir()
    (work / "app.py").write_text(APP)
    db = _read_only_store(shared_folder / "locked")
    db.parent.chmod(0o555)
    before = tree(db.parent)
    for command, result in each(READ_COMMANDS, "--store", f"sqlite:///{db}", cwd=work, prefix=as_nobody):
        assert_ok(result, command)
        assert "reading it as an immutable snapshot" in result.stderr, command
    assert tree(db.parent) == before


# -- URLs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "form"),
    [
        ("sqlite:/x.db", "sqlite:///relative/path.db"),
        ("sqlite:x.db", "sqlite:///relative/path.db"),
        ("sqlite://x.db", "sqlite:///relative/path.db"),
        ("sqlite//x.db", "sqlite:///relative/path.db"),
        ("SQLITE:/x.db", "sqlite:///relative/path.db"),
        ("sqlite3:///x.db", "sqlite:///relative/path.db"),
        ("file.db", "sqlite:///relative/path.db"),
        ("data/file.sqlite", "sqlite:///relative/path.db"),
        ("/var/lib/app/state.db", "sqlite:////absolute/path.db"),
        ("sqlite:///x.db?mode=ro", "open_store's keyword arguments"),
        ("postgres:/db", "postgresql://user:password@host:5432/dbname"),
        ("postgresql:db", "postgresql://user:password@host:5432/dbname"),
        ("postgresql:///", None),  # libpq's own form (local socket): accepted by the URL check
        ("postgresql+psycopg://u@h/db", "postgresql://user:password@host:5432/dbname"),
        ("pg://u@h/db", "postgresql://user:password@host:5432/dbname"),
        ("memory:", "memory://"),
        ("memory://x", "memory://"),
    ],
)
def test_near_miss_urls_are_refused_with_the_right_form(
    url: str, form: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A URL that is almost right is an InvalidURL showing the right form, and creates nothing."""
    monkeypatch.chdir(tmp_path)
    if form is None:
        assert scheme_of(url) == "postgresql"
        return
    with pytest.raises(InvalidURL) as caught:
        safepoint.open_store(url)
    assert form in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_near_miss_urls_from_the_command_line(tmp_path: Path) -> None:
    """`sqlite:/x.db` once made x.db in the current folder; now it is an error showing the right form."""
    for url in ("sqlite:/x.db", f"postgres:/{PASSWORD}"):
        result = safepoint_cli("runs", "--store", url, cwd=tmp_path)
        assert result.returncode not in (0, ExitCode.NOT_FOUND), result.stderr
        assert "sqlite:///relative/path.db" in result.stderr or "postgresql://user:" in result.stderr
        assert PASSWORD not in result.stderr
        assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_read_only_open_of_a_missing_or_foreign_store_raises_store_not_found(tmp_path: Path) -> None:
    """open_store(url, read_only=True): StoreNotFound (a NotFound), nothing created; writes refused."""
    url = f"sqlite:///{tmp_path}/sub/state.db"
    with pytest.raises(StoreNotFound) as caught:
        safepoint.open_store(url, read_only=True)
    assert isinstance(caught.value, safepoint.NotFound)
    assert str(caught.value).startswith(f"no safepoint store at {url}")
    with pytest.raises(StoreNotFound):
        safepoint.open_store("memory://", read_only=True)
    assert list(tmp_path.iterdir()) == []
    with safepoint.open_store(url) as store:
        two_steps(store)
    with safepoint.open_store(url, read_only=True) as store:
        assert store.load("r").state == {"n": 1}
        with pytest.raises(safepoint.StoreError, match="read_only=True"):
            store.save(store.load("r").next())
        with pytest.raises(safepoint.StoreError, match="read_only=True"):
            store.fork("r", step=0, new_run_id="f")
    with pytest.raises(InvalidURL):
        safepoint.open_store(url, read_only="yes")


def test_a_store_at_an_older_ddl_revision_is_not_upgraded_by_a_read_only_open(tmp_path: Path) -> None:
    """Read-only cannot upgrade: it says to open the store for writing once, and leaves the file as it was."""
    db = tmp_path / "old.db"
    with safepoint.open_store(f"sqlite:///{db}"):
        pass
    conn = sqlite3.connect(db)
    conn.execute(
        "DELETE FROM safepoint_ddl_revisions"
        " WHERE revision = (SELECT max(revision) FROM safepoint_ddl_revisions)"
    )
    conn.commit()
    conn.close()
    before = db.read_bytes()
    with pytest.raises(safepoint.StoreError, match="open it once for writing"):
        safepoint.open_store(f"sqlite:///{db}", read_only=True)
    assert db.read_bytes() == before


# -- PostgreSQL ------------------------------------------------------------------


def _url(dsn: str, *, user: str | None = None, password: str | None = None, dbname: str | None = None) -> str:
    """The test server's DSN as a URL, with another user, password or database."""
    parts = conninfo_to_dict(dsn)
    who = user or str(parts.get("user", "postgres"))
    if password is not None:
        who += f":{password}"
    host, port = parts.get("host", "127.0.0.1"), parts.get("port", "5432")
    return f"postgresql://{who}@{host}:{port}/{dbname or parts.get('dbname', 'test')}"


def _schemas(dsn: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [row[0] for row in conn.execute("SELECT nspname FROM pg_namespace ORDER BY nspname")]


@pytest.fixture
def fresh_database(postgres_dsn: str) -> Iterator[str]:
    """The name of a new, empty database on the test server, dropped afterwards."""
    name = f"sp_ro_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_every_read_command_on_a_fresh_database_creates_no_schema(
    postgres_dsn: str, fresh_database: str, tmp_path: Path
) -> None:
    """Not found, the password masked in the message, and the database's schemas the same as before."""
    (tmp_path / "app.py").write_text(APP)
    url = _url(postgres_dsn, password=PASSWORD, dbname=fresh_database)
    inside = _url(postgres_dsn, dbname=fresh_database)
    before = _schemas(inside)
    for command, result in each(READ_COMMANDS, "--store", url, cwd=tmp_path):
        assert result.returncode == ExitCode.NOT_FOUND, (command, result.stderr)
        assert "no safepoint store at postgresql://postgres:***@" in result.stderr
        assert 'the database has no schema "safepoint"' in result.stderr
        assert PASSWORD not in result.stderr
    result = safepoint_cli("runs", "--store", url, "--schema", "elsewhere", cwd=tmp_path)
    assert result.returncode == ExitCode.NOT_FOUND
    assert "?schema=elsewhere" in result.stderr
    missing = _url(postgres_dsn, password=PASSWORD, dbname=fresh_database + "_none")
    result = safepoint_cli("runs", "--store", missing, cwd=tmp_path)
    assert result.returncode == ExitCode.NOT_FOUND, result.stderr
    assert "the database does not exist" in result.stderr
    assert PASSWORD not in result.stderr
    assert _schemas(inside) == before
    assert list(tmp_path.iterdir()) == [tmp_path / "app.py"]


def test_a_schema_without_safepoints_tables_is_said_and_left_empty(postgres_dsn: str, pg_schema: str) -> None:
    """read_only on an existing but foreign schema: StoreNotFound, and still no table in it."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(pg_schema)))
    with pytest.raises(StoreNotFound, match="has no safepoint tables"):
        safepoint.open_store(postgres_dsn, schema=pg_schema, read_only=True)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s", (pg_schema,)).fetchone()
    assert tables == (0,)


def test_read_only_postgres_stores_sync_and_async(postgres_dsn: str, pg_schema: str) -> None:
    """read_only=True on PostgreSQL: reads work, writes are refused before any statement, sync and async."""
    with pytest.raises(StoreNotFound, match="has no schema"):
        asyncio.run(safepoint.open_async_store(postgres_dsn, schema=pg_schema, read_only=True))
    with safepoint.open_store(postgres_dsn, schema=pg_schema, max_size=1) as store:
        two_steps(store)
    with safepoint.open_store(postgres_dsn, schema=pg_schema, read_only=True, max_size=1) as store:
        assert store.load("r").state == {"n": 1}
        with pytest.raises(safepoint.StoreError, match="read_only=True"):
            store.save(store.load("r").next())

    async def main() -> None:
        store = await safepoint.open_async_store(
            f"{postgres_dsn}?schema={pg_schema}", read_only=True, max_size=1
        )
        try:
            cp = await store.load("r")
            assert cp.step == 1
            with pytest.raises(safepoint.StoreError, match="read_only=True"):
                await store.save(cp.next())
        finally:
            await store.close()

    asyncio.run(main())


@pytest.fixture
def reader_role(postgres_dsn: str) -> Iterator[str]:
    """A login role with no privileges of its own, dropped (with its grants) afterwards."""
    name = f"sp_reader_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def test_a_read_only_role_runs_every_read_command(
    postgres_dsn: str, pg_schema: str, reader_role: str, tmp_path: Path
) -> None:
    """USAGE on the schema and SELECT on its tables are all a read command needs."""
    with safepoint.open_store(postgres_dsn, schema=pg_schema) as store:
        two_steps(store)
        big = store.load("r").next()
        big.state["report"] = "x" * 300_000  # a value in the blob table too
        store.save(big)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        schema, role = sql.Identifier(pg_schema), sql.Identifier(reader_role)
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, role))
        conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(schema, role))
    (tmp_path / "app.py").write_text(APP)
    url = _url(postgres_dsn, user=reader_role)
    for command, result in each(READ_COMMANDS, "--store", url, "--schema", pg_schema, cwd=tmp_path):
        assert_ok(result, command)
    # The role really is read-only: a write command fails on the server's refusal, in one line.
    fixture = tmp_path / "r.json"
    assert_ok(
        safepoint_cli("export", "r", "-o", str(fixture), "--store", url, "--schema", pg_schema, cwd=tmp_path),
        ("export",),
    )
    result = safepoint_cli(
        "import", str(fixture), "--run-id", "copy", "--store", url, "--schema", pg_schema, cwd=tmp_path
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr


def test_schema_is_chosen_by_option_then_url_then_environment(postgres_dsn: str, tmp_path: Path) -> None:
    """--schema beats ?schema= beats SAFEPOINT_SCHEMA; open_store's schema= beats ?schema= too."""
    with fresh_schema(postgres_dsn) as a, fresh_schema(postgres_dsn) as b, fresh_schema(postgres_dsn) as c:
        for name in (a, b, c):
            with safepoint.open_store(f"{postgres_dsn}?schema={name}", max_size=1) as store:
                store.save(Checkpoint(run_id=f"in-{name}"))
        with safepoint.open_store(f"{postgres_dsn}?schema={b}", schema=a, max_size=1) as store:
            assert [r.run_id for r in store.runs()] == [f"in-{a}"]
        with safepoint.open_store(f"{postgres_dsn}?sslmode=prefer&schema={b}", max_size=1) as store:
            assert [r.run_id for r in store.runs()] == [f"in-{b}"]
            assert store.url.endswith(f"?sslmode=prefer&schema={b}")

        def listed(*args: str, env: dict[str, str]) -> list[str]:
            result = safepoint_cli("runs", "--json", *args, cwd=tmp_path, env=env)
            assert result.returncode == 0, result.stderr
            return [r["run_id"] for r in json.loads(result.stdout)["runs"]]

        env = {"SAFEPOINT_SCHEMA": c}
        assert listed("--store", f"{postgres_dsn}?schema={b}", "--schema", a, env=env) == [f"in-{a}"]
        assert listed("--store", f"{postgres_dsn}?schema={b}", env=env) == [f"in-{b}"]
        assert listed(env={"SAFEPOINT_STORE": postgres_dsn, **env}) == [f"in-{c}"]


def test_url_schema_parameter_is_taken_out_before_libpq(postgres_dsn: str, pg_schema: str) -> None:
    """libpq refuses unknown parameters: ?schema= never reaches it, and may sit anywhere in the query."""
    assert split_schema("postgresql://u:p@h/db?sslmode=require&schema=a%20b&x=1") == (
        "postgresql://u:p@h/db?sslmode=require&x=1",
        "a b",
    )
    assert split_schema("postgresql://h/db?schema=s") == ("postgresql://h/db", "s")
    assert split_schema("postgresql://h/db") == ("postgresql://h/db", None)
    with pytest.raises(InvalidURL, match="more than once"):
        split_schema("postgresql://h/db?schema=a&schema=b")
    with safepoint.open_store(f"{postgres_dsn}?schema={pg_schema}&connect_timeout=5", max_size=1) as store:
        store.save(Checkpoint(run_id="here"))
    with psycopg.connect(postgres_dsn) as conn:
        found = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename = 'safepoint_runs'",
            (pg_schema,),
        ).fetchone()
    assert found == (1,)
