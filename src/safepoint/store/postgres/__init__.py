"""The PostgreSQL backend: sync and async drivers on psycopg 3 and psycopg_pool.

``driver.PostgresDriver`` (sync) and ``async_driver.PostgresAsyncDriver``
(asyncio) run the same operations (``store/ops.py``) with the same SQL
(``queries.sql``), the same DDL setup and the same error translation
(``steps.py``); each only blocks on, or awaits, the statements it is handed.
Open a store with ``safepoint.open_store("postgresql://…")``.
"""
