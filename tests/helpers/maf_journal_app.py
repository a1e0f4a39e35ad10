"""An offline Agent Framework workflow for the call journal's tests: scripted models, a ledger outside the DB.

The workflow ``orders`` (``build()``): **clerk** (an ``AgentExecutor``) asks
its model, which calls ``lookup`` (idempotent: the ledger's ``once``), then
``charge`` twice in parallel (non-idempotent: the ledger's ``record``, a
repeat is a duplicate), then answers; **auditor** (a second executor, the
next superstep) calls ``lookup`` and gives the final answer. One workflow run
makes 5 model calls and 4 tool calls over 2 supersteps.

``Scripted`` is stateless, like a provider: the step it answers is how many
of its own tool-call turns follow the conversation's first user message, so
a fresh process asked the same request gives the same answer. It notes every
request it answers in the ledger (``Ledger.model``), keyed by what it was
asked and with the tokens it reports, so a request paid twice shows up and
``Ledger.check_usage`` can hold a run's counters to what was paid.
``LEDGER`` is set by whoever runs the workflow (a test, or a child process the crash test SIGKILLs).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agent_framework import (
    Agent,
    AgentExecutor,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    Message,
    Workflow,
    WorkflowBuilder,
    tool,
)

from safepoint import Reconcile
from safepoint.adapters.agent_framework import current_call_key, non_idempotent
from safepoint.testing.crash import Ledger

NAME = "orders"
RUN_ID = "agent-framework/orders"
LEDGER: dict[str, Any] = {"ledger": None, "turn": 0}
CLERK = [
    [("lookup", {"order": 7})],
    [("charge", {"amount": 5}), ("charge", {"amount": 7})],
    "charged 5 and 7",
]
AUDITOR = [[("lookup", {"order": 8})], "final answer: charged 5 and 7"]


def _ledger() -> Ledger | None:
    ledger: Ledger | None = LEDGER["ledger"]
    return ledger


class Scripted(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):  # type: ignore[misc]
    """Answers step ``k`` of ``script``: a str is the final text, a list of (tool, args) tool calls."""

    def __init__(self, name: str, script: list[Any]) -> None:
        super().__init__()
        self.name, self.script = name, script

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        return self._answer(list(messages))

    async def _answer(self, messages: list[Message]) -> ChatResponse:
        asked = next((m.text for m in messages if m.role == "user"), "")
        mine = [
            m
            for m in messages
            if any(
                c.type == "function_call" and str(c.call_id).startswith(self.name + "-") for c in m.contents
            )
        ]
        k = len(mine)
        usage = {"input_token_count": 10 + k + len(messages), "output_token_count": 5 + k}
        ledger = _ledger()
        if ledger is not None:  # what the provider is paid for this request
            paid = {"tokens_in": usage["input_token_count"], "tokens_out": usage["output_token_count"]}
            ledger.model(f"{self.name}#{k}|{asked}", paid)
        step = self.script[k]
        if isinstance(step, str):
            reply = Message(role="assistant", contents=[step])
            return ChatResponse(messages=[reply], usage_details=usage, response_id=f"{self.name}-{k}")  # type: ignore[arg-type]
        turn = hashlib.sha256(asked.encode()).hexdigest()[:6]  # ids differ from run to run, as a provider's
        calls = [
            Content.from_function_call(
                call_id=f"{self.name}-{k}-{j}-{turn}", name=name, arguments=json.dumps(args)
            )
            for j, (name, args) in enumerate(step)
        ]
        reply = Message(role="assistant", contents=calls)
        return ChatResponse(messages=[reply], usage_details=usage, response_id=f"{self.name}-{k}")  # type: ignore[arg-type]


@tool
async def lookup(order: int) -> str:
    """Look an order up (idempotent: the service keeps the first answer per key)."""
    ledger = _ledger()
    text = f"order {order}: 2 items"
    if ledger is None:
        return text
    return ledger.once(current_call_key() or f"lookup:{order}:{LEDGER['turn']}", lambda: text)


def charge_outcome(key: str, tool: str, args: Any) -> Reconcile:
    """Asked only for a charge a crash interrupted mid-call: did the payment go through?"""
    ledger = _ledger()
    if ledger is not None and ledger.happened(key):
        return Reconcile.skip(f"charged {args['amount']}")
    return Reconcile.rerun()


@non_idempotent(reconcile=charge_outcome)
@tool
async def charge(amount: int) -> str:
    """Charge the customer (non-idempotent: every call is a payment)."""
    ledger = _ledger()
    if ledger is not None:
        ledger.record(current_call_key() or f"charge:{amount}:{LEDGER['turn']}", amount)
    return f"charged {amount}"


def build(
    storage: Any = None,
    *,
    name: str = NAME,
    ids: tuple[str, str] = ("clerk", "auditor"),
    instructions: str | None = None,
) -> Workflow:
    """A fresh workflow (new agents, new executors), as a fresh process builds it; ``name``,
    the executors' ``ids`` and the clerk's ``instructions`` changeable for the unit tests."""
    clerk = Agent(Scripted("clerk", CLERK), name="clerk", instructions=instructions, tools=[lookup, charge])
    auditor = Agent(Scripted("auditor", AUDITOR), name="auditor", tools=[lookup])
    first, second = AgentExecutor(clerk, id=ids[0]), AgentExecutor(auditor, id=ids[1])
    builder = WorkflowBuilder(
        name=name, start_executor=first, checkpoint_storage=storage, output_from=[second]
    )
    return builder.add_edge(first, second).build()


def answer(result: Any) -> str:
    outputs = result.get_outputs()
    return str(outputs[-1].text) if outputs else ""
