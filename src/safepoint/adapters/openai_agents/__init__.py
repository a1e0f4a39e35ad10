"""The OpenAI Agents SDK on a safepoint store: ``SafepointSession`` and ``CallJournal``.

Switch a runner over in one line::

    store = safepoint.open_store("sqlite:///state.db")           # or postgresql://…
    result = await Runner.run(agent, "hi", session=SafepointSession("user-42", store))

and make a crash cost nothing with one more (docs/journal-openai-agents.md)::

    result = await CallJournal().run(agent, "hi", session=SafepointSession("user-42", store))

The package, by concern: ``session.py`` is the session (one safepoint run per
conversation); ``journal.py`` the journal's public face (``CallJournal``,
``non_idempotent``, ``current_call_key``); ``turn.py`` a turn's number, keys,
counters, start and end (its lease and the counters' names are the
journal's, ``safepoint.journal.holding`` and ``.counters``, shared with the
other session-style integrations); ``default_runner.py``, ``graph.py`` and ``calls.py`` where every model
and tool call of a turn is seen (the SDK's default runner, the cloned agent
graph, the wrappers); ``jsonform.py`` what is recorded, as JSON;
``sdk.py`` the SDK's non-public names, in one room.
"""

from __future__ import annotations

from safepoint.adapters import missing_framework

try:
    import agents.memory.session_settings  # noqa: F401  # the adapter's own imports need it
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_framework(__name__, "the OpenAI Agents SDK", "openai-agents") from exc

from .journal import CallJournal, current_call_key, non_idempotent
from .session import SafepointSession

__all__ = ["CallJournal", "SafepointSession", "current_call_key", "non_idempotent"]
