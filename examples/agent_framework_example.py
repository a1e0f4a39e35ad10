"""A Microsoft Agent Framework workflow checkpointing on safepoint, resumed by a second process.

    python examples/agent_framework_example.py [STORE_URL]   # default sqlite:///.safepoint/agent-framework-example.db

Offline: the workflow's one executor adds an order's lines one superstep at a
time (no model is called). The framework saves a checkpoint at every
superstep into safepoint; a fresh storage — as another process would open —
then resumes the workflow from a middle checkpoint and reaches the same total.
"""

from __future__ import annotations

import asyncio
import sys

from agent_framework import Executor, WorkflowBuilder, WorkflowContext, handler

import safepoint
from safepoint.adapters.agent_framework import SafepointCheckpointStorage

PRICES = [5, 7, 9, 10, 11]


class AddLine(Executor):
    """Superstep n adds line n of the order to the workflow's state; the last one yields the total."""

    @handler
    async def add(self, n: int, ctx: WorkflowContext[int, int]) -> None:
        lines = [*ctx.get_state("lines", []), {"line": n, "price": PRICES[n]}]
        ctx.set_state("lines", lines)
        if n + 1 < len(PRICES):
            await ctx.send_message(n + 1)
        else:
            await ctx.yield_output(sum(line["price"] for line in lines))


def build(storage: SafepointCheckpointStorage):  # type: ignore[no-untyped-def]
    add = AddLine(id="add-line")
    builder = WorkflowBuilder(name="order", start_executor=add, checkpoint_storage=storage)
    return builder.add_edge(add, add).build()


async def main(url: str) -> None:
    # 1. The one-line switch: checkpoint_storage=SafepointCheckpointStorage(store).
    store = safepoint.open_store(url)
    result = await build(SafepointCheckpointStorage(store)).run(0)
    print("order total:", result.get_outputs()[0])
    store.close()

    # 2. Later, in any process with the same store: pick a checkpoint and resume from it.
    storage = SafepointCheckpointStorage(url)  # a URL: the storage opens (and closes) its store
    ids = await storage.list_checkpoint_ids(workflow_name="order")
    print("checkpoints in the store:", len(ids))
    middle = await storage.load(ids[3])
    resumed = await build(storage).run(checkpoint_id=middle.checkpoint_id)
    print(f"resumed from superstep {middle.iteration_count}: order total {resumed.get_outputs()[0]}")
    storage.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///.safepoint/agent-framework-example.db"))
