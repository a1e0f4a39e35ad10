"""A Google ADK session service backed by a safepoint store: ``SafepointSessionService``.

Switch a runner over in one line::

    store = safepoint.open_store("sqlite:///state.db")           # or postgresql://…
    runner = Runner(agent=agent, app_name="app", session_service=SafepointSessionService(store))

Each session is one safepoint run, ``google-adk/<app>/<user>/<session>``
(percent-encoded; hashed when too long), labelled ``safepoint.adapter=google-adk``,
``google_adk.role=session`` and the three ids. ``create_session`` saves its
step 0; each ``append_event`` saves one step adding only the new event (ADK's
stale-session check first: ``StaleSessionError``); ``get_session`` reads the
latest step and, for ``num_recent_events`` / ``after_timestamp``, only the
segments of the history it needs (``flows``). ``app:`` and ``user:`` state
live in one run per app and one per user, updated under the store's
``Conflict`` (``shared``); ``temp:`` keys are never stored. Events are stored
in pydantic's JSON form.

``CallJournal`` (``journal``) is the call journal as an ADK plugin:
``Runner(..., session_service=SafepointSessionService(store), plugins=[CallJournal()])``
records each model response and tool result of a turn and replays them when
the same message resumes a turn a crash cut short.
"""

from __future__ import annotations

from safepoint.adapters import missing_framework

try:
    import google.adk.sessions.base_session_service  # noqa: F401  (the extra's presence)
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_framework(__name__, "Google's Agent Development Kit", "google-adk") from exc

from .journal import CallJournal, current_call_key, non_idempotent, waiting_in
from .service import SafepointSessionService

__all__ = ["CallJournal", "SafepointSessionService", "current_call_key", "non_idempotent", "waiting_in"]
