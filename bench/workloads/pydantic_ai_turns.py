"""Stored bytes of a Pydantic AI conversation on safepoint, turn after turn.

``measure(turns, workdir)`` saves a conversation through Pydantic AI's own
``ConversationStore.save`` (no model call): each turn appends a user message
of ~200 bytes and an assistant reply of ~400 bytes to the conversation and
saves it on ``SafepointConversationStore`` over a SQLite file. The result is
the file's bytes after a WAL checkpoint.

Pydantic AI ships no durable conversation store to measure beside it (only
``InMemoryConversationStore``), so the result has ``safepoint`` alone. Each
save stores only the turn's two entries (plus a small header and one row in
the entry-id index), so the bytes grow linearly with the turns.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent.parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from common import settled_sqlite_bytes  # noqa: E402
from pydantic_ai.conversation import Conversation  # noqa: E402
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart  # noqa: E402

from safepoint import open_store  # noqa: E402
from safepoint.adapters.pydantic_ai import SafepointConversationStore  # noqa: E402

USER = ("Where is my parcel? It was due on Monday and the tracking page has not moved since. " * 3)[:200]
REPLY = ("It left the regional depot this morning; the courier expects to deliver it tomorrow. " * 5)[:400]


async def _chat(conversations: SafepointConversationStore, turns: int) -> None:
    conversation = Conversation(conversation_id="bench-chat")
    for n in range(turns):
        conversation.messages += [
            ModelRequest(parts=[UserPromptPart(content=f"{n} {USER}")]),
            ModelResponse(parts=[TextPart(content=f"{n} {REPLY}")], model_name="bench"),
        ]
        await conversations.save(conversation)  # advances its revision: saved again next turn
    loaded = await conversations.load("bench-chat")
    assert loaded is not None
    assert len(loaded.messages) == 2 * turns


def measure(turns: int, workdir: Path) -> dict[str, int]:
    """Stored bytes after ``turns`` turns: {"safepoint": …} (Pydantic AI has no durable store)."""
    db = workdir / "pydantic-ai.db"
    store = open_store(f"sqlite:///{db}")
    try:
        asyncio.run(_chat(SafepointConversationStore(store), turns))
    finally:
        store.close()
    return {"safepoint": settled_sqlite_bytes(db)}
