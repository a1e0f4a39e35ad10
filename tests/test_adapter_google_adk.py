"""SafepointSessionService against ADK's own session services, scenario by scenario.

Every scenario runs on ADK's ``InMemorySessionService`` and on
``SafepointSessionService`` (SQLite and PostgreSQL, sync and async stores; a
fresh service object for every call as well as one reused) with the same
inputs, ids and clock, and must observe exactly the same results: sessions
(state across the ``app:``/``user:``/``temp:`` scopes, events, update times),
listings, deletions, the errors raised, tail reads. The stale-session
scenario is compared with ADK's ``SqliteSessionService`` instead: the
in-memory service has no stale check (and ``DatabaseSessionService`` needs
SQLAlchemy, which this environment does not install).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.platform import time as platform_time
from google.adk.platform import uuid as platform_uuid
from google.adk.sessions import InMemorySessionService
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types

from adapter_checks import BACKEND_KINDS, backend_store
from safepoint.adapters.google_adk import SafepointSessionService

Service = Callable[[], BaseSessionService]  # the service for the next call (fresh or reused)
Backend = Callable[[Path, bool], AbstractAsyncContextManager[Service]]
SEGMENT = 3  # small, so that tail reads cross segments in every scenario

HOSTILE_IDS = [
    "../../x",
    "a/b/../c",
    "'; DROP TABLE sessions; --",
    "\u202eevil\u200b",
    "a\x00b",
    "%2F%00",
    "x" * 300,
    "🦆 ünï",
]
HOSTILE_TEXTS = [
    "nul\x00inside",
    "\u202eRTL\u200bzero-width\ufeff",
    "'; DROP TABLE events; --",
    '[SECRET:API_KEY] and {"$secret": "X"}',
    "huge " + "y" * 200_000,
    "<script>alert(1)</script>",
]


def event(
    n: int, text: str, *, author: str = "user", delta: dict[str, Any] | None = None, ts: float
) -> Event:
    role = "user" if author == "user" else "model"
    return Event(
        id=f"ev-{n}",
        invocation_id=f"inv-{n // 2}",
        author=author,
        content=types.Content(role=role, parts=[types.Part(text=text)]),
        actions=EventActions(state_delta=delta or {}),
        timestamp=ts,
    )


def seen(value: Any) -> Any:
    """What a scenario records: pydantic models as JSON, errors by type, lists item by item."""
    if isinstance(value, BaseException):
        return ("error", type(value).__name__)
    if isinstance(value, list | tuple):
        return [seen(v) for v in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


async def attempt(call: Awaitable[Any]) -> Any:
    try:
        return seen(await call)
    except Exception as exc:  # the error's type is the observation
        return seen(exc)


# --- backends: each yields a factory of the service to use for the next call


@asynccontextmanager
async def in_memory(tmp: Path, fresh: bool) -> AsyncIterator[Service]:
    service = InMemorySessionService()
    yield lambda: service


@asynccontextmanager
async def adk_sqlite(tmp: Path, fresh: bool) -> AsyncIterator[Service]:
    services: list[SqliteSessionService] = []

    def make() -> SqliteSessionService:
        if fresh or not services:
            services.append(SqliteSessionService(str(tmp / "adk.db")))
        return services[-1]

    yield make
    for service in services:
        await service.close()


def ours(kind: str) -> Backend:
    @asynccontextmanager
    async def backend(tmp: Path, fresh: bool) -> AsyncIterator[Service]:
        async with backend_store(kind, tmp) as store:
            services: list[SafepointSessionService] = []

            def make() -> SafepointSessionService:
                if fresh or not services:
                    services.append(SafepointSessionService(store, segment_size=SEGMENT))
                return services[-1]

            yield make

    return backend


BACKENDS = BACKEND_KINDS


def observe(
    scenario: Callable[[Service], Awaitable[list[Any]]], backend: Backend, tmp: Path, fresh: bool
) -> Any:
    """Run ``scenario`` on ``backend`` with ADK's clock and ids made deterministic."""

    async def run() -> list[Any]:
        clock, ids = itertools.count(1), itertools.count(1)
        platform_time.set_time_provider(lambda: 1_700_000_000.0 + next(clock))
        platform_uuid.set_id_provider(lambda: f"generated-{next(ids)}")
        try:
            async with backend(tmp, fresh) as service:
                return await scenario(service)
        finally:
            platform_time.reset_time_provider()
            platform_uuid.reset_id_provider()

    return asyncio.run(run())


# --- scenarios: each returns everything it observed


async def lifecycle(svc: Service) -> list[Any]:
    """Create (with state in every scope), get, duplicate, append, list, delete."""
    out: list[Any] = []
    state = {"app:theme": "dark", "user:name": "Ada", "temp:scratch": 1, "topic": "printers"}
    s = await svc().create_session(app_name="app", user_id="u1", state=state, session_id="s1")
    out += [seen(s), await attempt(svc().create_session(app_name="app", user_id="u1", session_id="s1"))]
    out += [await attempt(svc().create_session(app_name="app", user_id="u1", session_id=" s1 "))]
    generated = await svc().create_session(app_name="app", user_id="u1")
    out += [seen(generated)]
    for n, (author, delta) in enumerate(
        [
            ("user", {"topic": "fire", "temp:step": 2}),
            ("model", {"app:theme": "light", "user:visits": 1}),
            ("user", {}),
            ("model", {"user:name": "Ada L.", "count": 3}),
        ]
    ):
        appended = await svc().append_event(s, event(n, f"text {n}", author=author, delta=delta, ts=1e9 + n))
        out += [seen(appended), seen(s)]
    out += [await attempt(svc().get_session(app_name="app", user_id="u1", session_id="s1"))]
    out += [await attempt(svc().get_session(app_name="app", user_id="u1", session_id=" s1"))]
    out += [await attempt(svc().get_session(app_name="app", user_id="u2", session_id="s1"))]
    out += [await attempt(svc().get_session(app_name="other", user_id="u1", session_id="s1"))]
    out += [await attempt(svc().get_session(app_name="app", user_id="u1", session_id="nope"))]
    for app, user in [("app", "u1"), ("app", None), ("app", "u2"), ("other", None)]:
        out += [await attempt(svc().list_sessions(app_name=app, user_id=user))]
    out += [await attempt(svc().get_user_state(app_name="app", user_id="u1"))]
    out += [await attempt(svc().get_user_state(app_name="app", user_id="nobody"))]
    out += [await attempt(svc().delete_session(app_name="app", user_id="u1", session_id="s1"))]
    out += [await attempt(svc().delete_session(app_name="app", user_id="u1", session_id="s1"))]
    out += [await attempt(svc().get_session(app_name="app", user_id="u1", session_id="s1"))]
    out += [await attempt(svc().append_event(s, event(9, "late", ts=2e9)))]
    out += [await attempt(svc().list_sessions(app_name="app"))]
    again = await svc().create_session(app_name="app", user_id="u1", session_id="s1")
    out += [seen(again), await attempt(svc().get_user_state(app_name="app", user_id="u1"))]
    return out


async def shared_scopes(svc: Service) -> list[Any]:
    """app: keys reach every session of the app, user: keys every session of the user."""
    out: list[Any] = []
    sessions = {}
    for user in ["ann", "bob"]:
        for name in ["one", "two"]:
            sessions[user, name] = await svc().create_session(app_name="app", user_id=user, session_id=name)
    other = await svc().create_session(app_name="other-app", user_id="ann", session_id="one")
    ts = iter(range(100))
    await svc().append_event(
        sessions["ann", "one"], event(1, "a", delta={"app:mode": "x"}, ts=3e9 + next(ts))
    )
    await svc().append_event(
        sessions["bob", "two"], event(2, "b", delta={"user:lang": "fr"}, ts=3e9 + next(ts))
    )
    await svc().append_event(
        sessions["ann", "two"], event(3, "c", delta={"user:lang": "en"}, ts=3e9 + next(ts))
    )
    await svc().append_event(
        other, event(4, "d", delta={"app:mode": "y", "user:lang": "de"}, ts=3e9 + next(ts))
    )
    for (user, name), _ in sessions.items():
        out += [await attempt(svc().get_session(app_name="app", user_id=user, session_id=name))]
    out += [await attempt(svc().list_sessions(app_name="app"))]
    out += [await attempt(svc().list_sessions(app_name="other-app", user_id="ann"))]
    out += [seen(sessions["ann", "one"])]  # the object held: it sees only its own appends
    return out


async def tail_reads(svc: Service) -> list[Any]:
    """num_recent_events and after_timestamp, alone and together, across segment boundaries."""
    s = await svc().create_session(app_name="app", user_id="u", session_id="long")
    stamps = [10.0, 11.0, 12.0, 12.0, 13.0, 9.0, 14.0, 15.0, 16.0, 16.5, 17.0, 18.0, 19.0]  # one goes back
    for n, ts in enumerate(stamps):
        await svc().append_event(s, event(n, f"e{n}", author="user" if n % 2 else "model", ts=ts))
    configs: list[GetSessionConfig | None] = [None, GetSessionConfig()]
    configs += [GetSessionConfig(num_recent_events=n) for n in [0, 1, 2, 3, 4, 6, 7, 13, 50]]
    configs += [
        GetSessionConfig(after_timestamp=t) for t in [0.0, 9.0, 9.5, 12.0, 13.5, 16.5, 18.5, 19.0, 99.0]
    ]
    configs += [
        GetSessionConfig(num_recent_events=n, after_timestamp=t) for n in [2, 5, 9] for t in [9.5, 16.0]
    ]
    out: list[Any] = []
    for config in configs:
        got = await svc().get_session(app_name="app", user_id="u", session_id="long", config=config)
        out += [[e.id for e in got.events] if got else None, seen(got)]
    out += [
        await attempt(svc().get_session(app_name="app", user_id="u", session_id="missing", config=configs[4]))
    ]
    return out


async def hostile(svc: Service) -> list[Any]:
    """Ids shaped like paths and SQL, control and invisible characters, huge and marker-shaped texts."""
    out: list[Any] = []
    for i, hostile_id in enumerate(HOSTILE_IDS):
        state = {f"user:{hostile_id}": hostile_id, hostile_id: {"$secret": "NAME"}, "app:k": i}
        s = await svc().create_session(
            app_name=hostile_id, user_id=hostile_id, state=state, session_id=hostile_id
        )
        text = HOSTILE_TEXTS[i % len(HOSTILE_TEXTS)]
        await svc().append_event(s, event(i, text, delta={hostile_id: text[:50]}, ts=5e9 + i))
        got = await svc().get_session(app_name=hostile_id, user_id=hostile_id, session_id=hostile_id)
        out += [seen(s), seen(got), await attempt(svc().list_sessions(app_name=hostile_id))]
    s = await svc().create_session(app_name="texts", user_id="u", session_id="t")
    for i, text in enumerate(HOSTILE_TEXTS):
        await svc().append_event(s, event(100 + i, text, ts=6e9 + i))
    out += [await attempt(svc().get_session(app_name="texts", user_id="u", session_id="t"))]
    out += [await attempt(svc().list_sessions(app_name="../../x", user_id="../../x"))]
    await svc().delete_session(app_name="../../x", user_id="../../x", session_id="../../x")
    out += [await attempt(svc().list_sessions(app_name="../../x"))]
    out += [await attempt(svc().list_sessions(app_name="a/b/../c"))]
    return out


async def stale_appends(svc: Service) -> list[Any]:
    """A session object left behind by another writer's append is refused; a reloaded one is not."""
    out: list[Any] = []
    first = await svc().create_session(app_name="app", user_id="u", session_id="s")
    second = await svc().get_session(app_name="app", user_id="u", session_id="s")
    assert second is not None
    out += [seen(await svc().append_event(first, event(1, "from the first", ts=7e9 + 1)))]
    out += [await attempt(svc().append_event(second, event(2, "from the stale one", ts=7e9 + 2)))]
    out += [seen(second)]  # unchanged by the refused append
    out += [seen(await svc().append_event(first, event(3, "first again", ts=7e9 + 3)))]
    reloaded = await svc().get_session(app_name="app", user_id="u", session_id="s")
    assert reloaded is not None
    out += [seen(await svc().append_event(reloaded, event(4, "after reload", ts=7e9 + 4)))]
    out += [await attempt(svc().append_event(first, event(5, "first is stale now", ts=7e9 + 5)))]
    (listed,) = (await svc().list_sessions(app_name="app", user_id="u")).sessions
    out += [seen(await svc().append_event(listed, event(6, "from a listed session", ts=7e9 + 6)))]
    out += [await attempt(svc().get_session(app_name="app", user_id="u", session_id="s"))]
    return out


SCENARIOS = [lifecycle, shared_scopes, tail_reads, hostile]


@pytest.mark.parametrize("fresh", [False, True], ids=["reused", "fresh"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
@pytest.mark.parametrize("backend", BACKENDS)
def test_same_results_as_in_memory_service(scenario: Any, backend: str, fresh: bool, tmp_path: Path) -> None:
    """On the same inputs, SafepointSessionService observes exactly what InMemorySessionService does."""
    expected = observe(scenario, in_memory, tmp_path, fresh)
    assert observe(scenario, ours(backend), tmp_path, fresh) == expected


@pytest.mark.parametrize("fresh", [False, True], ids=["reused", "fresh"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_stale_sessions_as_adk_sqlite_service(backend: str, fresh: bool, tmp_path: Path) -> None:
    """A stale session object's append fails (StaleSessionError) as with ADK's SqliteSessionService."""
    expected = observe(stale_appends, adk_sqlite, tmp_path, fresh)
    assert ("error", "StaleSessionError") in expected
    assert observe(stale_appends, ours(backend), tmp_path, fresh) == expected
