"""The sync PostgreSQL driver: the entries of ``entries.py`` blocking on a ``psycopg_pool.ConnectionPool``.

Thread-safe: any number of threads share the pool. What it holds of its own
is how a forked child finds a pool of its own, under a lock, as threads may
race to it.
"""

from __future__ import annotations

import os
import threading

import psycopg
from psycopg_pool import ConnectionPool

from safepoint.store import forking
from safepoint.twins import Blocking

from .config import PostgresConfig
from .entries import PostgresEntries


class PostgresDriver(PostgresEntries, Blocking):
    """Runs store operations on a pool of PostgreSQL connections; thread-safe."""

    connection = psycopg.Connection
    client_cursor = psycopg.ClientCursor
    pool_class = ConnectionPool
    pool: ConnectionPool

    def __init__(
        self, config: PostgresConfig, pool: ConnectionPool, search_path: str, qualified: dict[str, str]
    ) -> None:
        super().__init__(config, pool, search_path, qualified)
        self._fork_lock = threading.Lock()
        forking.register(self)

    # -- fork safety (store/forking.py) ----------------------------------------

    def _own_pool(self) -> ConnectionPool:
        if self._pid != os.getpid():
            with self._fork_lock:
                if self._pid != os.getpid():
                    self._discard_inherited(reopen=not self.pool.closed)
        return self.pool

    def _reopened(self, reopen: bool) -> None:
        if reopen:  # at once, under the fork lock: no thread sees the new pool before it is open
            self.pool.open()

    def before_fork(self) -> None:
        pass  # nothing to quiesce: the child never touches the parent's pool

    def after_fork_in_parent(self) -> None:
        pass

    def after_fork_in_child(self) -> None:
        self._fork_lock = threading.Lock()  # another thread may have held it at the fork
