"""A real PgBouncer in front of the test PostgreSQL server, started on a free local port.

Imported by the tests that run the store through PgBouncer (it is not a pytest
conftest). ``running_pgbouncer(dsn)`` writes a ``pgbouncer.ini`` and a user
list into a temporary folder, starts Debian's ``pgbouncer`` binary on a free
port of 127.0.0.1, waits until it accepts connections, yields the DSN through
it and stops it afterwards. ``PgBouncer`` is the same thing as an object, for
tests that restart it mid-run (``restart()`` keeps the port, so clients
reconnect to the same DSN).

PgBouncer refuses to run as root, and the development and CI machines run
everything as root: there the process runs as the ``postgres`` user (or
``nobody``) through ``setpriv``, and the folder is handed to that user.

Debian ships PgBouncer 1.18, which does not track prepared statements in
transaction mode (1.21 does): open the store with ``prepare_threshold=None``.
The store sets its schema per transaction, so any schema works through it.

When no ``pgbouncer`` binary is found the tests skip with the reason, except
under ``CI=true``, where they fail: ``make test`` installs it first.
"""

from __future__ import annotations

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
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

# Debian installs it in /usr/sbin, which is not on an unprivileged user's PATH.
_SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
# The users PgBouncer may run as when the tests run as root, in order of preference.
_RUN_AS = ("postgres", "nobody")


def find_pgbouncer() -> str | None:
    """The path of the ``pgbouncer`` binary, or None."""
    return shutil.which("pgbouncer", path=_SEARCH_PATH)


def require_pgbouncer() -> str:
    """The ``pgbouncer`` binary; skips (fails under ``CI=true``) when there is none."""
    binary = find_pgbouncer()
    if binary is None:
        reason = "pgbouncer not found (Debian: apt-get install pgbouncer; `make test` does it)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the PgBouncer tests must run, not skip)", pytrace=False)
        pytest.skip(reason)
    return binary


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ini_value(value: str) -> str:
    # libpq-style quoting for the [databases] connection string.
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class PgBouncer:
    """One PgBouncer process in front of ``dsn``'s server; ``dsn`` is the URL through it."""

    def __init__(self, dsn: str, *, pool_mode: str = "transaction", pool_size: int = 20) -> None:
        self.binary = require_pgbouncer()
        server = conninfo_to_dict(dsn)
        self.user = str(server.get("user") or pwd.getpwuid(os.getuid()).pw_name)
        self.dbname = str(server.get("dbname") or self.user)
        self.port = _free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="sp-pgbouncer-"))
        self._run_as = self._unprivileged_user()
        self._process: subprocess.Popen[bytes] | None = None
        self._write_config(server, pool_mode, pool_size)
        # A URL, like the DSNs the rest of the suite passes around.
        self.dsn = f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.dbname}"
        if server.get("password"):
            self.dsn = make_conninfo(self.dsn, password=str(server["password"]))

    @staticmethod
    def _unprivileged_user() -> pwd.struct_passwd | None:
        if os.geteuid() != 0:
            return None
        for name in _RUN_AS:
            try:
                return pwd.getpwnam(name)
            except KeyError:
                continue
        raise RuntimeError("running as root and no unprivileged user to run pgbouncer as")

    def _write_config(self, server: dict[str, object], pool_mode: str, pool_size: int) -> None:
        target = {
            "host": str(server.get("host") or "127.0.0.1"),
            "port": str(server.get("port") or "5432"),
        }
        if server.get("password"):
            target["password"] = str(server["password"])
        db_line = " ".join(f"{key}={_ini_value(value)}" for key, value in target.items())
        password = str(server.get("password") or "")
        (self.folder / "userlist.txt").write_text(f'"{self.user}" "{password}"\n')
        (self.folder / "pgbouncer.ini").write_text(
            "\n".join(
                [
                    "[databases]",
                    # Any database name goes to the same server: the benchmark makes its own.
                    f"* = {db_line}",
                    "",
                    "[pgbouncer]",
                    "listen_addr = 127.0.0.1",
                    f"listen_port = {self.port}",
                    # No unix socket: two PgBouncers on one machine would fight over /tmp/.s.PGSQL.*.
                    "unix_socket_dir =",
                    "auth_type = trust",
                    f"auth_file = {self.folder / 'userlist.txt'}",
                    f"admin_users = {self.user}",
                    f"pool_mode = {pool_mode}",
                    f"default_pool_size = {pool_size}",
                    "max_client_conn = 2000",
                    # psycopg and libpq clients may send these; PgBouncer rejects unknown ones.
                    "ignore_startup_parameters = extra_float_digits,options,search_path",
                    # After the server restarts, log in again within a second (default: 15 s).
                    "server_login_retry = 1",
                    "server_connect_timeout = 5",
                    f"logfile = {self.folder / 'pgbouncer.log'}",
                    f"pidfile = {self.folder / 'pgbouncer.pid'}",
                    "",
                ]
            )
        )
        if self._run_as is not None:
            for path in (self.folder, *self.folder.iterdir()):
                os.chown(path, self._run_as.pw_uid, self._run_as.pw_gid)

    @property
    def pid(self) -> int | None:
        """The running PgBouncer's process id (``setpriv`` execs it, so it is the child's own)."""
        return None if self._process is None else self._process.pid

    def log(self) -> str:
        """PgBouncer's log so far (for failure messages)."""
        try:
            return (self.folder / "pgbouncer.log").read_text(errors="replace")
        except OSError:
            return ""

    def start(self, timeout: float = 10.0) -> None:
        """Start the process and wait until it accepts connections."""
        command = [self.binary, str(self.folder / "pgbouncer.ini")]
        if self._run_as is not None:
            command = [
                "setpriv",
                f"--reuid={self._run_as.pw_uid}",
                f"--regid={self._run_as.pw_gid}",
                "--clear-groups",
                *command,
            ]
        # stderr to a file, never a pipe: PgBouncer logs every login there too,
        # and once a pipe nobody reads is full (64 KiB) it blocks in write() and
        # every client hangs — a wedged pooler the test would blame on the library.
        with open(self.folder / "pgbouncer.stderr", "ab") as stderr:
            self._process = subprocess.Popen(
                command, cwd=self.folder, stdout=subprocess.DEVNULL, stderr=stderr
            )
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                stderr = (self.folder / "pgbouncer.stderr").read_text(errors="replace")
                raise RuntimeError(
                    f"pgbouncer exited with {self._process.returncode}:\n{stderr}\n{self.log()}"
                )
            try:
                with psycopg.connect(self.dsn, connect_timeout=2, autocommit=True) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"pgbouncer did not accept connections:\n{self.log()}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """Shut down at once (SIGTERM): client and server connections are dropped."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def restart(self) -> None:
        """Stop and start again on the same port: clients see dropped connections, then a fresh pooler."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop and remove the folder."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


@contextmanager
def running_pgbouncer(dsn: str, *, pool_mode: str = "transaction", pool_size: int = 20) -> Iterator[str]:
    """A PgBouncer in front of ``dsn``'s server; yields the DSN through it, stops it afterwards."""
    with started_pgbouncer(dsn, pool_mode=pool_mode, pool_size=pool_size) as bouncer:
        yield bouncer.dsn


@contextmanager
def started_pgbouncer(
    dsn: str, *, pool_mode: str = "transaction", pool_size: int = 20
) -> Iterator[PgBouncer]:
    """Like ``running_pgbouncer`` but yields the ``PgBouncer``, for tests that restart it."""
    bouncer = PgBouncer(dsn, pool_mode=pool_mode, pool_size=pool_size)
    try:
        bouncer.start()
        yield bouncer
    finally:
        bouncer.close()
