"""The crash kit's entry point for the Google ADK adapter: a scripted session, resumable anywhere.

``run`` plays a fixed conversation into one ADK session through
``SafepointSessionService`` — mapped onto the kit's ``run_id`` with the
service's ``run_id`` override — and returns ADK's view of the final session.
Every event is a function of its position (id, text, timestamp, a state delta
in the session's own scope and in ``temp:``), and ADK's clock is pinned, so a
process killed anywhere resumes by reading the session and appending from the
first event it lacks, and ends exactly as an uninterrupted run.

With ``shared=True`` the events also set ``app:`` and ``user:`` keys, which
live in their own runs: the kit's boundaries are its run's saves alone, so
boundary kills land where aimed; its kills inside a save count every save
of the process, so the random-instant test plays the session run alone.
"""

from __future__ import annotations

from typing import Any

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.platform import time as platform_time
from google.genai import types

from safepoint import AsyncStore, Store
from safepoint.adapters.google_adk import SafepointSessionService


def scripted(k: int, shared: bool = False) -> Event:
    """The conversation's ``k``-th event (with ``shared``, it sets app- and user-wide keys too)."""
    author, role = ("user", "user") if k % 2 == 0 else ("assistant", "model")
    content = types.Content(role=role, parts=[types.Part(text=f"{author} says {k}: " + "words " * 20)])
    delta: dict[str, Any] = {"turn": k // 2, "seen": k, "temp:scratch": k}
    if shared:
        delta |= {"app:last_turn": k // 2, f"user:saw_{k % 3}": k}
    return Event(
        id=f"event-{k}",
        invocation_id=f"turn-{k // 2}",
        author=author,
        content=content,
        actions=EventActions(state_delta=delta),
        timestamp=1_000.0 + k,
    )


async def run(
    store: AsyncStore | Store, run_id: str, ledger: Any, turns: int = 4, shared: bool = False
) -> Any:
    """Play (or resume) ``turns`` turns of two events each; the final session as ADK sees it."""
    del ledger  # no side effects outside the store
    platform_time.set_time_provider(lambda: 999.0)  # the session's creation time
    service = SafepointSessionService(store, segment_size=3, run_id=lambda *_: run_id)
    ids = {"app_name": "crash-app", "user_id": "ada", "session_id": "chat"}
    session = await service.get_session(**ids)
    if session is None:
        session = await service.create_session(**ids, state={"name": "Ada", "temp:x": 1})
    for k in range(len(session.events), 2 * turns):
        await service.append_event(session, scripted(k, shared))
    final = await service.get_session(**ids)
    assert final is not None
    return final.model_dump(mode="json")
