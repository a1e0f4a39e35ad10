"""LangGraph's PostgresSaver under the same compiled StateGraph as the SQLite section, at its defaults.

Each writer is one ``PostgresSaver.from_conn_string(...)`` (LangGraph's own
connection: autocommit, ``prepare_threshold=0``, no pipeline) on its own
``thread_id``; every operation is one ``graph.invoke`` carrying the step's
user or tool message, whose one node returns the assistant reply and the new
counters, cursor and state (``langgraph_sqlite.AgentState``: ``messages``
with ``add_messages``). ``invoke`` uses the default durability mode. The
tables live in the benchmark's schema, set as the connection's
``search_path``; ``setup`` (the saver's migrations) runs once, untimed.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import agent_workload
import pg_server
from agent_workload import AgentStep
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph_sqlite import AgentState


def setup(url: str, schema: str) -> None:
    """Create the saver's tables in ``schema`` (which must exist), as its docs say to, once."""
    with PostgresSaver.from_conn_string(pg_server.with_search_path(url, schema)) as saver:
        saver.setup()


def build_graph(saver: PostgresSaver, current: list[AgentStep]) -> Any:
    def agent(state: AgentState) -> dict[str, Any]:
        step = current[-1]
        return {
            "messages": [step.reply],
            "counters": step.counters,
            "cursor": step.cursor,
            "state": step.state,
        }

    builder = StateGraph(AgentState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver)


class LangGraphWriter:
    """A ``pg_writer`` contender: one ``graph.invoke`` per agent step."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._exit = contextlib.ExitStack()
        saver = self._exit.enter_context(
            PostgresSaver.from_conn_string(pg_server.with_search_path(spec["url"], spec["schema"]))
        )
        self._steps = agent_workload.build(spec["steps"]).steps
        self._current: list[AgentStep] = []
        self._graph = build_graph(saver, self._current)
        self._config: RunnableConfig = {"configurable": {"thread_id": f"writer-{spec['index']}"}}
        self.seconds: list[float] = []

    def block(self, count: int) -> int:
        done = 0
        while done < count and len(self.seconds) < len(self._steps):
            agent_step = self._steps[len(self.seconds)]
            self._current.append(agent_step)
            start = time.perf_counter()
            self._graph.invoke({"messages": [agent_step.incoming]}, self._config)
            self.seconds.append(time.perf_counter() - start)
            self._current.clear()
            done += 1
        return done

    def result(self) -> dict[str, Any]:
        return {"seconds": self.seconds}

    def close(self) -> None:
        self._exit.close()
