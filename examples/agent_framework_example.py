"""A Microsoft Agent Framework workflow checkpointing on safepoint, resumed by a second process;
then an agent's workflow run through the call journal, cut short mid-superstep and resumed.

    python examples/agent_framework_example.py [STORE_URL]   # default sqlite:///.safepoint/agent-framework-example.db

Offline: the workflow's one executor adds an order's lines one superstep at a
time (no model is called). The framework saves a checkpoint at every
superstep into safepoint; a fresh storage — as another process would open —
then resumes the workflow from a middle checkpoint and reaches the same total.

Part 3 runs an agent (an offline scripted chat client, a ``charge`` tool that
must not pay twice) through ``CallJournal``: the run dies right after the
payment, before the superstep's checkpoint; the resume from the latest
checkpoint, through the journal, replays the recorded model response and
asks the tool's reconcile hook about the payment in flight instead of paying
again (docs/journal-agent-framework.md).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from agent_framework import (
    Agent,
    AgentExecutor,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    Content,
    Executor,
    FunctionInvocationLayer,
    Message,
    WorkflowBuilder,
    WorkflowContext,
    handler,
    tool,
)

import safepoint
from safepoint import Reconcile
from safepoint.adapters.agent_framework import (
    CallJournal,
    SafepointCheckpointStorage,
    current_call_key,
    non_idempotent,
)

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

    await journaled(url)


class OfflineModel(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):  # type: ignore[misc]
    """A stand-in for a provider: asks for ``charge(42)``, then answers with the tool's result."""

    requests = 0

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        return self._answer(list(messages))

    async def _answer(self, messages: list[Message]) -> ChatResponse:
        OfflineModel.requests += 1
        usage: Any = {"input_token_count": 20 * len(messages), "output_token_count": 8}
        results = [c for m in messages for c in m.contents if c.type == "function_result"]
        if results:
            reply = Message(role="assistant", contents=[f"done: {results[-1].result}"])
        else:
            call = Content.from_function_call(call_id="call-1", name="charge", arguments='{"amount": 42}')
            reply = Message(role="assistant", contents=[call])
        return ChatResponse(messages=[reply], usage_details=usage)


PAYMENTS: dict[str, int] = {}  # the payment service, by idempotency key
CUT = {"armed": True}


class ProcessDied(BaseException):
    """Stands for the process dying (a deploy, an OOM kill): nothing catches it."""


def payment_outcome(key: str, tool_name: str, args: Any) -> Reconcile:
    """Asked only about a payment a crash cut mid-call: did it go through?"""
    return Reconcile.skip(f"charged {PAYMENTS[key]}") if key in PAYMENTS else Reconcile.rerun()


@non_idempotent(reconcile=payment_outcome)
@tool
async def charge(amount: int) -> str:
    """Charge the customer (every call is a payment)."""
    key = current_call_key() or "no-journal"
    PAYMENTS[key] = amount
    if CUT.pop("armed", False):
        raise ProcessDied  # right after the payment, before its result is recorded
    return f"charged {amount}"


def build_agent_flow(storage: SafepointCheckpointStorage):  # type: ignore[no-untyped-def]
    clerk = AgentExecutor(Agent(OfflineModel(), name="clerk", tools=[charge]), id="clerk")
    return WorkflowBuilder(name="refund", start_executor=clerk, checkpoint_storage=storage).build()


async def journaled(url: str) -> None:
    # 3. The call journal: one line, journal.run(workflow, message) instead of workflow.run(message).
    storage = SafepointCheckpointStorage(url)
    try:
        await CallJournal(storage).run(build_agent_flow(storage), "refund order 7")
    except ProcessDied:
        print("journaled run cut short right after the payment")
    storage.close()

    # After the crash, in any process: resume the latest checkpoint through the journal.
    storage = SafepointCheckpointStorage(url)
    journal = CallJournal(storage)
    latest = await storage.get_latest(workflow_name="refund")
    assert latest is not None
    assert latest.messages  # the cut superstep's input, still to deliver
    result = await journal.run(build_agent_flow(storage), checkpoint_id=latest.checkpoint_id)
    turn = journal.last_turn
    assert turn is not None
    print(
        f"resumed: {result.get_outputs()[-1].text} | payments: {len(PAYMENTS)} "
        f"| model requests: {OfflineModel.requests} | replayed: {turn.models.replayed}"
    )
    counters = storage.store.load("agent-framework/refund").counters
    print(
        "counters:",
        {name: counters[name] for name in ("tokens_in", "tokens_out", "model_calls", "tool_calls")},
    )
    storage.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///.safepoint/agent-framework-example.db"))
