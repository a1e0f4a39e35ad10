"""What every framework adapter's tests do the same way: the stores of a differential test, the example.

``backend_store(kind, tmp)`` opens the store a differential test's backend ``kind`` names —
``BACKEND_KINDS``: SQLite or PostgreSQL (a schema of its own, dropped after), through a
``Store`` or an ``AsyncStore`` — and closes it after; ``backend_location(kind, tmp)`` gives the
URL and options alone, for a test that opens several stores on one database.
``run_example("pydantic_ai", tmp_path)`` runs ``examples/pydantic_ai_example.py`` in a subprocess,
offline, on a fresh SQLite file in ``tmp_path``, as a user would (``python examples/…``), and returns
its output lines; a non-zero exit fails with its stderr. (That importing an adapter without its
framework names the extra is checked for every adapter at once: test_adapters_missing_extra.py.)
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import safepoint
from conftest_postgres import fresh_schema, require_postgres

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


BACKEND_KINDS = ["sqlite-store", "sqlite-async", "postgres-store", "postgres-async"]


@contextmanager
def backend_location(kind: str, tmp: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(url, open options)`` of ``kind``'s database: a file in ``tmp``, or a fresh schema."""
    if not kind.startswith("postgres"):
        yield f"sqlite:///{tmp / 'safepoint.db'}", {}
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        yield dsn, {"schema": schema, "max_size": 2}


@asynccontextmanager
async def backend_store(kind: str, tmp: Path) -> AsyncIterator[Any]:
    """The ``Store`` (``*-store``) or ``AsyncStore`` (``*-async``) of ``kind``, closed after."""
    with backend_location(kind, tmp) as (url, options):
        if kind.endswith("async"):
            store: Any = await safepoint.open_async_store(url, **options)
        else:
            store = safepoint.open_store(url, **options)
        try:
            yield store
        finally:
            closing = store.close()
            if asyncio.iscoroutine(closing):
                await closing


def run_example(name: str, tmp_path: Path) -> list[str]:
    example = ROOT / "examples" / f"{name}_example.py"
    done = subprocess.run(
        [sys.executable, str(example), f"sqlite:///{tmp_path / 'example.db'}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()
