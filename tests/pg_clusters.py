"""PostgreSQL clusters of a test's own: a primary and its streaming standbys, made with
PostgreSQL's tools on free ports in temporary folders, and removed afterwards.

The shared server on 5432 is never touched. ``initdb`` runs once per test
process (:func:`template`); each scenario copies that folder for its primary
and takes its standby with ``pg_basebackup``, so a scenario starts from a
server that never saw another's data. The servers run as the ``postgres``
user (``initdb`` refuses root), with ``fsync=off``: the tests kill processes,
never the machine, and the OS cache survives a process kill.

    with clusters() as kit:
        primary = kit.primary(synchronous=True)
        standby = kit.standby(primary, name="standby1")
        ...
        primary.stop("immediate")      # every backend at once
        standby.promote()

Everything a kit started is stopped and its folders removed when the block
ends, failed or not — orphaned backends of a postmaster killed alone included.
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

USER = "postgres"
_made: dict[str, Path] = {}  # the template folder, once made in this process


def bindir() -> Path:
    """Where PostgreSQL's server tools live (``pg_config --bindir``, else Debian's folder)."""
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        candidate = Path(out.stdout.strip())
        if (candidate / "initdb").exists():
            return candidate
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if debian:
        return debian[-1].parent
    raise FileNotFoundError("initdb")


def require_tools() -> None:
    """initdb, pg_ctl and pg_basebackup, and root to run them as ``postgres``; under CI=true they
    must be there."""
    try:
        bindir()
        pwd.getpwnam(USER)
        ok = os.geteuid() == 0
    except (FileNotFoundError, KeyError):
        ok = False
    if not ok:
        message = "needs PostgreSQL's server tools (initdb, pg_ctl, pg_basebackup), a postgres user and root"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(
    args: list[str], *, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """One of PostgreSQL's tools, run as the ``postgres`` user."""
    tool = str(bindir() / args[0])
    done = subprocess.run(
        [tool, *args[1:]], user=USER, capture_output=True, text=True, timeout=timeout, check=False, cwd="/"
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"{args[0]} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done


def _owned_folder(prefix: str) -> Path:
    """A fresh folder under /tmp that the postgres user owns (pytest's tmp_path is root's, 0700)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    entry = pwd.getpwnam(USER)
    os.chown(folder, entry.pw_uid, entry.pw_gid)
    return folder


def template() -> Path:
    """A freshly initdb'd data folder, made once per process and copied for each primary."""
    made = _made.get("template")
    if made is None or not made.exists():
        home = _owned_folder("sp-pg-template-")
        atexit.register(shutil.rmtree, home, ignore_errors=True)
        data = home / "data"
        _as_postgres(["initdb", "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync"])
        with (data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write(
                "\n# safepoint's test clusters\n"
                "listen_addresses = '127.0.0.1'\n"
                "fsync = off\n"
                "full_page_writes = off\n"
                "wal_level = replica\n"
                "max_wal_senders = 10\n"
                "hot_standby = on\n"
                "max_connections = 100\n"
                "shared_buffers = 32MB\n"
                "wal_keep_size = 256MB\n"
                "log_min_messages = warning\n"
            )
        _made["template"] = data
    return _made["template"]


@dataclass
class Cluster:
    """One running server: its data folder, port and socket folder."""

    home: Path
    port: int
    name: str
    children: set[int] = field(default_factory=set)

    @property
    def data(self) -> Path:
        return self.home / "data"

    @property
    def log(self) -> Path:
        return self.home / "server.log"

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={USER} dbname={dbname}"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.home}"
        _as_postgres(
            ["pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start"]
        )

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m mode``: ``immediate`` ends every backend at once, as a crash does."""
        self._note_children()
        _as_postgres(["pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop"], check=False)

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text(encoding="utf-8").split()[0])
        except (FileNotFoundError, ValueError, IndexError):
            return None

    def kill_postmaster(self) -> None:
        """SIGKILL the postmaster alone; its backends are orphaned and notice on their own."""
        pid = self.postmaster_pid()
        assert pid is not None, "the server is not running"
        self._note_children()
        os.kill(pid, signal.SIGKILL)

    def promote(self) -> None:
        _as_postgres(["pg_ctl", "-D", str(self.data), "-w", "-t", "60", "promote"])

    def execute(self, query: str, dbname: str = "postgres") -> list[tuple[object, ...]]:
        with psycopg.connect(self.dsn(dbname), autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(query.encode())
            return cursor.fetchall() if cursor.description is not None else []

    def process_pid(self, backend_type: str) -> int | None:
        """The pid of the server's process of that type (``walreceiver``, ``walsender``…)."""
        rows = self.execute(f"SELECT pid FROM pg_stat_activity WHERE backend_type = '{backend_type}'")
        return int(rows[0][0]) if rows else None  # type: ignore[call-overload]

    def _note_children(self) -> None:
        """Remember the postmaster's children, so that cleanup can end orphans of a killed postmaster."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                self.children.add(int(entry.name))

    def remove(self) -> None:
        """Stop it however it is, end every process it left, remove its folder."""
        if self.postmaster_pid() is not None:
            self.stop("immediate")
        for pid in list(self.children) + ([p] if (p := self.postmaster_pid()) else []):
            try:
                os.kill(pid, signal.SIGCONT)  # a stopped walreceiver must be able to die
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.home, ignore_errors=True)


class Kit:
    """The clusters of one test; :func:`clusters` removes them all at the end."""

    def __init__(self) -> None:
        self.made: list[Cluster] = []

    def primary(self, *, synchronous: str | None = None, settings: dict[str, str] | None = None) -> Cluster:
        """A fresh primary from the template; ``synchronous`` names the standby whose flush every
        commit waits for (``synchronous_standby_names``), None for asynchronous replication."""
        home = _owned_folder("sp-pg-primary-")
        subprocess.run(["cp", "-a", str(template()), str(home / "data")], check=True)
        lines = dict(settings or {})
        if synchronous is not None:
            lines["synchronous_standby_names"] = f"'{synchronous}'"
            lines["synchronous_commit"] = "on"
        if lines:
            with (home / "data" / "postgresql.conf").open("a", encoding="utf-8") as conf:
                conf.writelines(f"{key} = {value}\n" for key, value in lines.items())
        cluster = Cluster(home, free_port(), "primary")
        self.made.append(cluster)
        cluster.start()
        return cluster

    def standby(
        self, primary: Cluster, *, name: str = "standby1", settings: dict[str, str] | None = None
    ) -> Cluster:
        """A hot standby of ``primary`` streaming as ``name`` (its application_name), started and
        caught up."""
        home = _owned_folder(f"sp-pg-{name}-")
        _as_postgres(
            [
                "pg_basebackup",
                "-d",
                primary.dsn() + f" application_name={name}",
                "-D",
                str(home / "data"),
                "-X",
                "stream",
                "-R",
                "--checkpoint=fast",
                "--no-sync",
            ]
        )
        lines = {"primary_conninfo": f"'{primary.dsn()} application_name={name}'", **(settings or {})}
        # A standby promoted later is a primary of its own: it must not wait for itself.
        lines["synchronous_standby_names"] = "''"
        with (home / "data" / "postgresql.auto.conf").open("a", encoding="utf-8") as conf:
            conf.writelines(f"{key} = {value}\n" for key, value in lines.items())
        cluster = Cluster(home, free_port(), name)
        self.made.append(cluster)
        cluster.start()
        wait_streaming(primary, name)
        return cluster

    def remove(self) -> None:
        for cluster in reversed(self.made):
            cluster.remove()


def wait_streaming(primary: Cluster, name: str, timeout: float = 60) -> None:
    """Until ``primary`` streams to the standby ``name``."""
    deadline = time.monotonic() + timeout
    while True:
        rows = primary.execute(f"SELECT state FROM pg_stat_replication WHERE application_name = '{name}'")
        if rows and rows[0][0] == "streaming":
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"standby {name} did not start streaming")
        time.sleep(0.1)


def wait_writable(cluster: Cluster, timeout: float = 60) -> None:
    """Until ``cluster`` accepts writes (a promoted standby has left recovery)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if cluster.execute("SELECT pg_is_in_recovery()") == [(False,)]:
                return
        except psycopg.OperationalError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{cluster.name} did not become writable")
        time.sleep(0.1)


def multi_host_url(*hosts: Cluster, dbname: str = "postgres", attrs: str = "read-write") -> str:
    """One libpq URL naming every host, ``target_session_attrs`` choosing among them."""
    where = ",".join(f"127.0.0.1:{c.port}" for c in hosts)
    return f"postgresql://{USER}@{where}/{dbname}?target_session_attrs={attrs}&connect_timeout=2"


@contextmanager
def clusters() -> Iterator[Kit]:
    require_tools()
    kit = Kit()
    try:
        yield kit
    finally:
        kit.remove()
