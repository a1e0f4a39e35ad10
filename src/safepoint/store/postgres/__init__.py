"""The PostgreSQL backend: sync and async drivers on psycopg 3 and psycopg_pool.

``driver.PostgresDriver`` (sync) and ``async_driver.PostgresAsyncDriver``
(asyncio) are one driver written once (``entries.py``, and the transaction
in ``transaction.py``): the same operations (``store/ops/``) with the same
SQL (``queries.sql``), the same DDL setup and the same error translation
(``statements.py``); one blocks on each call of its connection, the other awaits it.
Open a store with ``safepoint.open_store("postgresql://…")``.

psycopg is the ``postgres`` extra, so a SQLite-only install has no database
driver. Every module here is reached through this package, so this is the one
place that says which extra to install when psycopg is missing.
"""

from __future__ import annotations

from safepoint.errors import MissingExtra

try:  # the drivers import both anyway; a psycopg without libpq fails here too
    import psycopg  # noqa: F401
    import psycopg_pool  # noqa: F401
except ImportError as exc:
    raise MissingExtra("the PostgreSQL store", "postgres", exc.name or "psycopg") from exc
