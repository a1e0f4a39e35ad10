"""The floor: plain sqlite3 single-row commits with the same durability as safepoint.

The raw writer runs *interleaved* with a store run: after every block of
``BLOCK`` agent steps it makes ``BLOCK`` commits of its own, on its own file
in the same directory. Disk-speed drift (other processes, the WAL growing,
the host) then hits both sides alike, which a raw run before or after the
store run would not guarantee.

Before its first timed commit the writer makes ``WARM_COMMITS`` untimed
ones, enough for SQLite's automatic checkpoint to have reset the WAL once.
Until then every commit appends to the WAL *file*, and its ``fdatasync``
also has to write the file's new size, which made a fresh writer's commits
almost twice as slow as later ones on the benchmark machine: a floor
measured there would be too low.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

ROW_BYTES = 1024
BLOCK = 50
WARM_COMMITS = 1500  # > SQLite's default wal_autocheckpoint (1000 pages) at about one page per commit


class RawWriter:
    """A plain WAL + ``synchronous=FULL`` connection committing one row at a time."""

    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = FULL")
        self._conn.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        rng = random.Random(ROW_BYTES)
        self._bodies = [rng.randbytes(ROW_BYTES) for _ in range(64)]
        self.commit_seconds: list[float] = []
        self.burst(WARM_COMMITS)
        self.commit_seconds.clear()

    def burst(self, count: int) -> None:
        conn = self._conn
        for _ in range(count):
            body = self._bodies[len(self.commit_seconds) % len(self._bodies)]
            start = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO rows (body) VALUES (?)", (body,))
            conn.execute("COMMIT")
            self.commit_seconds.append(time.perf_counter() - start)

    def commit(self, body: bytes) -> None:
        """One timed commit of ``body`` (instead of the usual 1 KB row)."""
        conn = self._conn
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO rows (body) VALUES (?)", (body,))
        conn.execute("COMMIT")
        self.commit_seconds.append(time.perf_counter() - start)

    def interleave(self, total_steps: int) -> Callable[[int], None]:
        """A hook for a store run: call it after each agent step (outside the timers)."""

        def after_step(step: int) -> None:
            if step % BLOCK == 0:
                self.burst(BLOCK)
            elif step == total_steps:
                self.burst(step % BLOCK)

        return after_step

    def close(self) -> list[float]:
        """Close the connection; the seconds each commit took."""
        self._conn.close()
        return self.commit_seconds
