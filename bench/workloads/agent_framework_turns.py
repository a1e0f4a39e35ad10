"""Stored bytes of an Agent Framework workflow's checkpoints: safepoint next to FileCheckpointStorage.

``measure(turns, workdir)`` runs a real workflow (``WorkflowBuilder``, one
executor looping on itself, no model call) for ``turns`` supersteps; each
superstep appends a turn — a user message of ~200 bytes and an assistant
reply of ~400 bytes — to a conversation kept in the workflow's state, and the
framework saves a checkpoint after each. The same workflow runs once on
``SafepointCheckpointStorage`` over a SQLite file and once on the
framework's ``FileCheckpointStorage``; the result is the bytes each left:
the SQLite file after a WAL checkpoint (``safepoint``) and the checkpoint
directory's files (``file``).

Every framework checkpoint is a full snapshot — checkpoint k holds the
whole conversation of k turns — so a storage that writes each checkpoint
as it is grows quadratically with the turns, whatever its encoding.
FileCheckpointStorage does (one JSON file per checkpoint). Safepoint stores
the conversation list once: each checkpoint refers to the journal ranges of
its items and the save appends only the new turn, so its bytes grow
linearly.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent.parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from agent_framework import (  # noqa: E402
    Executor,
    FileCheckpointStorage,
    WorkflowBuilder,
    WorkflowContext,
    handler,
)
from common import dir_bytes, settled_sqlite_bytes  # noqa: E402

from safepoint import open_store  # noqa: E402
from safepoint.adapters.agent_framework import SafepointCheckpointStorage  # noqa: E402

USER = ("Where is my parcel? It was due on Monday and the tracking page has not moved since. " * 3)[:200]
REPLY = ("It left the regional depot this morning; the courier expects to deliver it tomorrow. " * 5)[:400]


class Chat(Executor):
    """Superstep n appends turn n to the conversation in the workflow's state."""

    def __init__(self, turns: int) -> None:
        super().__init__(id="chat")
        self.turns = turns

    @handler
    async def take_turn(self, n: int, ctx: WorkflowContext[int, int]) -> None:
        turn = [{"role": "user", "text": f"{n} {USER}"}, {"role": "assistant", "text": f"{n} {REPLY}"}]
        ctx.set_state("conversation", [*ctx.get_state("conversation", []), *turn])
        if n + 1 < self.turns:
            await ctx.send_message(n + 1)
        else:
            await ctx.yield_output(n + 1)


async def _run(storage: Any, turns: int) -> None:
    chat = Chat(turns)
    builder = WorkflowBuilder(
        name="bench-chat", start_executor=chat, checkpoint_storage=storage, max_iterations=turns + 2
    )
    result = await builder.add_edge(chat, chat).build().run(0)
    assert result.get_outputs() == [turns]


def measure(turns: int, workdir: Path) -> dict[str, int]:
    """Stored bytes after ``turns`` supersteps: {"safepoint": …, "file": …}."""
    db = workdir / "agent-framework.db"
    store = open_store(f"sqlite:///{db}")
    try:
        asyncio.run(_run(SafepointCheckpointStorage(store), turns))
    finally:
        store.close()
    directory = workdir / "agent-framework-files"
    asyncio.run(_run(FileCheckpointStorage(directory), turns))
    return {"safepoint": settled_sqlite_bytes(db), "file": dir_bytes(directory)}
