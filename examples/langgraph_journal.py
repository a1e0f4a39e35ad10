"""LangGraph with safepoint's call journal: a crash right after a payment costs nothing.

    python examples/langgraph_journal.py [STORE_URL]

An agent (a scripted offline chat model — put your real one in its place)
asks for two tools in one turn: ``charge``, which moves money and must never
run twice, and ``lookup``. A first process is SIGKILLed right after the
charge went through, before LangGraph saved anything about it. A second
process resumes the thread: the model's recorded response is replayed (not
paid again), the charge is not made again (its reconcile hook asks the
payment service, by the idempotency key the journal handed it), and the
counters come from the journal. Unix only (the first process is a fork).

Compared with a graph on ``SafepointSaver(store)``, two lines change (marked
``# journal``), plus the ``@non_idempotent`` mark on the tool with an effect.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict

import safepoint
from safepoint.adapters.langgraph import SafepointSaver, current_call_key, journal_tools, non_idempotent
from safepoint.harness.actions import Reconcile

PAYMENTS = Path(".safepoint/payments.jsonl")  # the payment service's own records, outside safepoint
PAID_REQUESTS: list[str] = []  # model requests this process paid for


def payment_made(key: str) -> bool:
    made = PAYMENTS.read_text().splitlines() if PAYMENTS.exists() else []
    return any(json.loads(line)["key"] == key for line in made)


def ask_the_service(key: str, tool_name: str, args: Any) -> Reconcile:
    """Reconcile hook: the charge was in flight at a crash — did the service take it?"""
    if payment_made(key):
        return Reconcile.skip(f"charged {args['args']['amount']} EUR")
    return Reconcile.rerun()  # never reached the service: charge now, under the same key


@non_idempotent(reconcile=ask_the_service)
@tool
def charge(amount: int) -> str:
    """Charge the customer's card."""
    with PAYMENTS.open("a") as service:  # the journal key is the payment's idempotency key
        service.write(json.dumps({"key": current_call_key(), "amount": amount}) + "\n")
    if os.environ.get("CRASH_AFTER_CHARGE"):
        os.kill(os.getpid(), signal.SIGKILL)  # the money moved; nothing is saved yet
    return f"charged {amount} EUR"


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"{order}: 2 printers, 90 EUR"


class ScriptedModel(BaseChatModel):
    """Offline: asks for both tools, then answers with what they returned."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[t.name for t in tools], **kwargs)

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        PAID_REQUESTS.append(f"request {len(messages)}")
        results = [m.content for m in messages if isinstance(m, ToolMessage)]
        tokens_in = 40 * len(messages)
        usage = {"input_tokens": tokens_in, "output_tokens": 20, "total_tokens": tokens_in + 20}
        if results:
            reply = AIMessage(content="Done: " + "; ".join(sorted(results)), usage_metadata=usage)  # type: ignore[arg-type]
        else:
            calls = [
                {"name": "lookup", "args": {"order": "A-7"}, "id": "call_lookup"},
                {"name": "charge", "args": {"amount": 90}, "id": "call_charge"},
            ]
            reply = AIMessage(content="", tool_calls=calls, usage_metadata=usage)  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=reply)])


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build(store: safepoint.Store) -> Any:
    model = ScriptedModel().bind_tools([charge, lookup])
    saver = SafepointSaver(store, journal=True)  # journal
    tools = ToolNode([charge, lookup], **journal_tools())  # journal
    builder = StateGraph(State)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def main(url: str) -> None:
    PAYMENTS.parent.mkdir(exist_ok=True)
    PAYMENTS.unlink(missing_ok=True)
    config: Any = {"configurable": {"thread_id": f"order-A-7-{os.getpid()}"}}

    # 1. A process that dies right after the charge went through (SIGKILL: no cleanup at all).
    child = os.fork()
    if child == 0:
        os.environ["CRASH_AFTER_CHARGE"] = "1"
        with safepoint.open_store(url) as store:
            build(store).invoke({"messages": [("user", "Bill order A-7, please.")]}, config)
        os._exit(0)
    _, status = os.waitpid(child, 0)
    print("first process:", "SIGKILLed after the charge" if os.WIFSIGNALED(status) else "finished")

    # 2. A fresh start resumes the thread.
    with safepoint.open_store(url) as store:
        graph = build(store)
        answer = graph.invoke(None, config)["messages"][-1].content
        journal = graph.checkpointer.journal
        print("answer:", answer)
        print("payments made:", len(PAYMENTS.read_text().splitlines()))
        print("model requests paid by the resumed process:", len(PAID_REQUESTS))
        tally = journal.tally(config["configurable"]["thread_id"])
        print(f"counters from the journal: {tally.tokens_in} tokens in, {tally.tokens_out} out")
        seen = journal.seen
        print(f"this process replayed {seen.replayed} recorded calls, reconciled {seen.reconciled}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///.safepoint/langgraph-journal.db")
