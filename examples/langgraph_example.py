"""LangGraph on safepoint: a chat graph that survives restarts, waits for a human, and time-travels.

    python examples/langgraph_example.py [STORE_URL]

STORE_URL defaults to sqlite:///.safepoint/langgraph-example.db (a PostgreSQL
URL works the same). The example is offline: the chat model is LangChain's
GenericFakeChatModel — put your real model (ChatOpenAI(...), …) in its place.
"""

from __future__ import annotations

import itertools
import sys
import uuid
from typing import Annotated, Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

import safepoint
from safepoint.adapters.langgraph import SafepointSaver

model = GenericFakeChatModel(messages=(AIMessage(content=f"Draft reply #{i}.") for i in itertools.count(1)))


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: bool


def chat(state: State) -> dict[str, Any]:
    return {"messages": [model.invoke(state["messages"])]}


def review(state: State) -> dict[str, Any]:
    # Pauses the run until someone answers; the thread waits in the store meanwhile.
    decision = interrupt({"question": "Send this reply?", "reply": state["messages"][-1].content})
    return {"approved": decision == "yes"}


def build(checkpointer: SafepointSaver) -> Any:
    builder = StateGraph(State)
    builder.add_node("chat", chat)
    builder.add_node("review", review)
    builder.add_edge(START, "chat")
    builder.add_edge("chat", "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=checkpointer)


def main(url: str) -> None:
    thread = f"ticket-{uuid.uuid4().hex[:8]}"
    config: Any = {"configurable": {"thread_id": thread}}

    # 1. The one-line switch: checkpointer=SafepointSaver(store).
    store = safepoint.open_store(url)
    graph = build(SafepointSaver(store))
    graph.invoke({"messages": [("user", "My printer is on fire.")]}, config)
    print("waiting for:", graph.get_state(config).next)
    print("run status:", store.run(f"langgraph/{thread}").status)
    store.close()  # the process may stop here: nothing is lost

    # 2. Later, in any process with the same store: resume with the human's answer.
    with SafepointSaver.from_url(url) as saver:
        graph = build(saver)
        done = graph.invoke(Command(resume="yes"), config)
        print("approved:", done["approved"], "| messages:", len(done["messages"]))

        # 3. Another turn, then time travel: branch from before the first question.
        graph.invoke({"messages": [("user", "Still burning.")]}, config)
        graph.invoke(Command(resume="yes"), config)
        start = [s for s in graph.get_state_history(config) if s.metadata["source"] == "input"][-1]
        branch = graph.invoke({"messages": [("user", "Is it under warranty?")]}, start.config)
        print("branch:", [m.content for m in branch["messages"]])
        print("checkpoints in the thread's history:", len(list(graph.get_state_history(config))))

    print(f"inspect it:  safepoint runs --store {url} --label langgraph.thread_id={thread}")
    print(f"             safepoint show langgraph/{thread} --store {url}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///.safepoint/langgraph-example.db")
