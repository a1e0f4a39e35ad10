"""A real Agent Framework workflow with checkpointing on safepoint, for the crash-test kit and the tests.

The workflow is one executor looping on itself: each superstep is a turn — a
user message (~200 bytes) and an assistant reply (~400 bytes) from an offline
fake model — appended to a conversation kept in the workflow's state; after
``turns`` turns it yields the conversation's length as its output. The
framework checkpoints it at every superstep.

``run`` is the kit's entry point: it starts the workflow, or resumes it from
the latest checkpoint in the store, and returns the final conversation. The
framework names checkpoints with random UUIDs and the wall clock; a crash
test compares a killed run with an uninterrupted one, so ``Deterministic``
gives each checkpoint an id and a timestamp from its superstep instead.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_framework import Executor, Workflow, WorkflowBuilder, WorkflowCheckpoint, WorkflowContext, handler

from safepoint import AsyncStore, Store
from safepoint.adapters.agent_framework import SafepointCheckpointStorage

NAME = "support-chat"
RUN_ID = "agent-framework/support-chat"  # the run holding NAME's checkpoints
_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


def turn(n: int) -> list[dict[str, str]]:
    """Turn ``n``: what the user said and what the (fake) model answered."""
    question = f"Question {n}: " + "where is my parcel, and when will it arrive? " * 4
    answer = f"Answer {n}: " + "it left the depot this morning and arrives tomorrow before noon. " * 6
    return [{"role": "user", "text": question[:200]}, {"role": "assistant", "text": answer[:400]}]


class Chat(Executor):
    """One turn per superstep; the conversation lives in the workflow's state."""

    def __init__(self, turns: int) -> None:
        super().__init__(id="chat")
        self.turns = turns

    @handler
    async def take_turn(self, n: int, ctx: WorkflowContext[int, int]) -> None:
        conversation = ctx.get_state("conversation", [])
        ctx.set_state("conversation", [*conversation, *turn(n)])
        if n + 1 < self.turns:
            await ctx.send_message(n + 1)
        else:
            await ctx.yield_output(len(conversation) + 2)


def build(storage: Any, turns: int) -> Workflow:
    chat = Chat(turns)
    builder = WorkflowBuilder(
        name=NAME, start_executor=chat, checkpoint_storage=storage, max_iterations=turns + 2
    )
    return builder.add_edge(chat, chat).build()


class Deterministic:
    """A storage that names each checkpoint after its superstep (id and timestamp), then saves it."""

    def __init__(self, storage: Any) -> None:
        self.storage = storage

    async def save(self, checkpoint: WorkflowCheckpoint) -> str:
        n = checkpoint.iteration_count
        named = replace(
            checkpoint,
            checkpoint_id=f"{checkpoint.workflow_name}-{n}",
            timestamp=(_EPOCH + timedelta(seconds=n)).isoformat(),
        )
        return str(await self.storage.save(named))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.storage, name)


async def run_to_end(storage: Any, turns: int) -> list[Any]:
    """Start the workflow, or resume it from its latest checkpoint; return the final conversation."""
    latest = await storage.get_latest(workflow_name=NAME)
    workflow = build(Deterministic(storage), turns)
    if latest is None:
        await workflow.run(0)
    elif latest.messages:  # messages still to deliver: the workflow had not finished
        await workflow.run(checkpoint_id=latest.checkpoint_id)
    final = await storage.get_latest(workflow_name=NAME)
    return list(final.state["conversation"])


async def run(store: AsyncStore | Store, run_id: str, ledger: Any, turns: int = 5, index: bool = True) -> Any:
    """The crash kit's entry point (``run_id`` is RUN_ID: the kit compares that run)."""
    assert run_id == RUN_ID, run_id
    return await run_to_end(SafepointCheckpointStorage(store, index=index), turns)
