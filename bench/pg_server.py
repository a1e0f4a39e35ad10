"""The PostgreSQL server the benchmark talks to: reachability, scratch schemas, settings, CPU use.

Every PostgreSQL section works in schemas of its own (``bench_…``), made
here and dropped afterwards, so nothing is left behind in the database.
CPU use is read from ``/proc``: the server's processes (every process named
``postgres``, plus what the postmaster's exited children used) against the
benchmark's own client processes, and the machine's total from
``/proc/stat``; client and server share this machine's cores.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"

# What decides the cost of a durable commit, and what the reader needs to
# reproduce the numbers.
SETTINGS = (
    "server_version",
    "synchronous_commit",
    "fsync",
    "wal_sync_method",
    "full_page_writes",
    "commit_delay",
    "shared_buffers",
    "wal_buffers",
    "max_wal_size",
    "checkpoint_timeout",
    "wal_compression",
    "max_connections",
)
_TICKS = os.sysconf("SC_CLK_TCK")


def unreachable(url: str) -> str | None:
    """Why the server at ``url`` cannot be used, or None if a connection works."""
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc}"
    return None


def schema_name(prefix: str) -> str:
    return f"bench_{prefix}_{os.getpid()}_{secrets.token_hex(3)}"


def drop_schema(url: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextmanager
def scratch_schema(url: str, prefix: str, *, create: bool = False) -> Iterator[str]:
    """A fresh schema name (created if ``create``), dropped with everything in it afterwards."""
    schema = schema_name(prefix)
    if create:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield schema
    finally:
        drop_schema(url, schema)


def with_search_path(url: str, schema: str) -> str:
    """A libpq connection string for ``url`` whose sessions use ``schema`` for unqualified names."""
    return make_conninfo(url, options=f"-c search_path={schema}")


def settings(url: str) -> dict[str, str]:
    with psycopg.connect(url, autocommit=True) as conn:
        out = {}
        for name in SETTINGS:
            row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
            out[name] = str(row[0]) if row else "?"
        row = conn.execute(
            "SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'"
        ).fetchone()
        out["pg_stat_statements"] = "installed" if row and row[0] else "not installed"
    return out


# -- CPU use ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CpuSample:
    server: float  # CPU seconds (user + system) used so far by the server's processes
    clients: float  # ... by the given client processes
    busy: float  # ... by the whole machine (all cores)
    idle: float  # idle + iowait seconds of the whole machine (all cores)

    def __sub__(self, other: CpuSample) -> CpuSample:
        return CpuSample(
            self.server - other.server,
            self.clients - other.clients,
            self.busy - other.busy,
            self.idle - other.idle,
        )

    def __add__(self, other: CpuSample) -> CpuSample:
        return CpuSample(
            self.server + other.server,
            self.clients + other.clients,
            self.busy + other.busy,
            self.idle + other.idle,
        )


ZERO = CpuSample(0.0, 0.0, 0.0, 0.0)


def sample(clients: Iterable[int]) -> CpuSample:
    """CPU seconds used so far; differences between two samples give a phase's use."""
    server = 0.0
    pids = _server_pids()
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:
            server += fields[0] + fields[1]
            if fields[4] not in pids:  # the postmaster: its reaped children (exited backends) too
                server += fields[2] + fields[3]
    client = 0.0
    for pid in clients:
        fields = _stat(pid)
        if fields is not None:
            client += fields[0] + fields[1]
    busy, idle = _machine()
    return CpuSample(server / _TICKS, client / _TICKS, busy / _TICKS, idle / _TICKS)


def _server_pids() -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                comm = (entry / "comm").read_text().strip()
            except OSError:
                continue
            if comm == "postgres":
                out.add(int(entry.name))
    return out


def _stat(pid: int) -> tuple[int, int, int, int, int] | None:
    """(utime, stime, cutime, cstime, ppid) in clock ticks, or None if the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text.rsplit(")", 1)[1].split()
    # rest[0] is field 3 (state): ppid is field 4, utime..cstime are fields 14..17.
    return int(rest[11]), int(rest[12]), int(rest[13]), int(rest[14]), int(rest[1])


def _machine() -> tuple[int, int]:
    first = Path("/proc/stat").read_text().splitlines()[0].split()
    values = [int(v) for v in first[1:]]
    user, nice, system, idle, iowait, irq, softirq = values[:7]
    steal = values[7] if len(values) > 7 else 0
    return user + nice + system + irq + softirq + steal, idle + iowait
