"""A Pydantic AI conversation store backed by a safepoint store: ``SafepointConversationStore``.

Switch an agent's conversations over in one line::

    conversations = SafepointConversationStore(safepoint.open_store("sqlite:///state.db"))
    conversation = await conversations.load(cid) or Conversation(conversation_id=cid)
    result = await agent.run("hi", conversation=conversation)
    await conversations.save(result)

Each conversation is one safepoint run whose messages are the entries it
stored, each once, appended step by step; a fork reads the history it shares
from its parent's checkpoint instead of copying it. See ``layout.py`` for what
is stored where and docs/adapters.md for the whole picture.
"""

from __future__ import annotations

from safepoint.adapters import missing_framework

try:
    import pydantic_ai.conversation_store  # noqa: F401  (the framework this adapter needs)
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_framework(__name__, "Pydantic AI", "pydantic-ai") from exc

from .journal import LastTurn, SafepointJournal, current_call_key, non_idempotent
from .layout import conversation_run_id, index_run_id
from .store import SafepointConversationStore

__all__ = [
    "LastTurn",
    "SafepointConversationStore",
    "SafepointJournal",
    "conversation_run_id",
    "current_call_key",
    "index_run_id",
    "non_idempotent",
]
