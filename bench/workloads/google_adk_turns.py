"""Stored bytes of a Google ADK session after N turns: safepoint's session service next to ADK's own.

    from workloads.google_adk_turns import measure
    measure(1000, Path("/tmp/work"))  # {"safepoint": …, "adk-sqlite": …}

Each turn appends two events through ``BaseSessionService.append_event`` (no
model call is needed to store a turn): the user's message (~200 bytes of
text) and the model's reply (~400 bytes). Contenders, each a fresh SQLite file:

- ``safepoint``: ``SafepointSessionService`` on ``sqlite:///…``; bytes are the
  database file after ``PRAGMA wal_checkpoint(TRUNCATE)``.
- ``adk-sqlite``: ADK's ``SqliteSessionService`` (aiosqlite), its database file.

ADK's ``DatabaseSessionService`` (``sqlite+aiosqlite://``) needs SQLAlchemy,
which the lock does not install; it is measured only where importing
SQLAlchemy works (``adk-database``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from common import settled_sqlite_bytes  # noqa: E402
from google.adk.events.event import Event  # noqa: E402
from google.adk.sessions.base_session_service import BaseSessionService  # noqa: E402
from google.adk.sessions.sqlite_session_service import SqliteSessionService  # noqa: E402
from google.genai import types  # noqa: E402

import safepoint  # noqa: E402
from safepoint.adapters.google_adk import SafepointSessionService  # noqa: E402

USER_TEXT = "Please look at the printer on floor three; it prints every page twice. " * 3  # ~200 bytes
MODEL_TEXT = "I checked the queue: the driver duplicates jobs after the last update. " * 6  # ~400 bytes


def _event(turn: int, author: str, text: str) -> Event:
    role = "user" if author == "user" else "model"
    content = types.Content(role=role, parts=[types.Part(text=text[:400] if role == "model" else text[:200])])
    return Event(id=f"{author}-{turn}", invocation_id=f"inv-{turn}", author=author, content=content)


async def _turns(service: BaseSessionService, turns: int) -> None:
    session = await service.create_session(app_name="bench", user_id="u", session_id="s")
    for turn in range(turns):
        await service.append_event(session, _event(turn, "user", USER_TEXT))
        await service.append_event(session, _event(turn, "assistant", MODEL_TEXT))


def _safepoint(turns: int, workdir: Path) -> int:
    path = workdir / "safepoint-adk.db"
    store = safepoint.open_store(f"sqlite:///{path}")
    try:
        asyncio.run(_turns(SafepointSessionService(store), turns))
    finally:
        store.close()
    return settled_sqlite_bytes(path)


def _adk_sqlite(turns: int, workdir: Path) -> int:
    path = workdir / "adk-sqlite.db"

    async def run() -> None:
        service = SqliteSessionService(str(path))
        await _turns(service, turns)
        await service.close()

    asyncio.run(run())
    return settled_sqlite_bytes(path)


def _adk_database(turns: int, workdir: Path) -> int:
    # Imported here: the module needs SQLAlchemy, which measure() checks for first.
    from google.adk.sessions.database_session_service import DatabaseSessionService  # noqa: PLC0415

    path = workdir / "adk-database.db"

    async def run() -> None:
        service = DatabaseSessionService(f"sqlite+aiosqlite:///{path}")
        await _turns(service, turns)
        await service.close()

    asyncio.run(run())
    return settled_sqlite_bytes(path)


def measure(turns: int, workdir: Path) -> dict[str, int]:
    """Stored bytes after ``turns`` turns, by contender (see the module docstring)."""
    workdir.mkdir(parents=True, exist_ok=True)
    sizes = {"safepoint": _safepoint(turns, workdir), "adk-sqlite": _adk_sqlite(turns, workdir)}
    if importlib.util.find_spec("sqlalchemy") is not None:
        sizes["adk-database"] = _adk_database(turns, workdir)
    return sizes
