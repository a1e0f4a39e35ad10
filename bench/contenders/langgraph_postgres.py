"""A real compiled LangGraph graph on PostgreSQL: LangGraph's ``PostgresSaver`` or safepoint's
``SafepointSaver``, each at its defaults, in one ``pg_writer`` child.

``PostgresSaver.from_conn_string(...)`` is LangGraph's own connection
(autocommit, ``prepare_threshold=0``, no pipeline) with the benchmark's schema
as its ``search_path``; ``setup`` (the saver's migrations) runs once,
untimed. ``SafepointSaver`` wraps ``safepoint.open_store(url, schema=…)``.
Every operation is one ``graph.invoke`` of the ``lg_graph`` graph (the same
as the SQLite section's) carrying the step's user or tool message, on the
writer's own ``thread_id``, at the default durability.

With ``probes`` in the spec, after the turns named the writer reads, outside
the timer, the bytes in the schema's tables (``pg_total_relation_size``:
heap, TOAST and indexes) and times ``graph.get_state``.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pg_server
import psycopg
from common import time_calls
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import sql
from workloads.agent import AgentStep, build_workload

import safepoint
from contenders.lg_graph import build_graph
from safepoint.adapters.langgraph import SafepointSaver


def setup(url: str, schema: str) -> None:
    """Create the saver's tables in ``schema`` (which must exist), as its docs say to, once."""
    with PostgresSaver.from_conn_string(pg_server.with_search_path(url, schema)) as saver:
        saver.setup()


def schema_bytes(url: str, schema: str) -> int:
    """Bytes of every table in ``schema``, with its TOAST and indexes."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c "
                "JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = {} AND c.relkind = 'r'"
            ).format(sql.Literal(schema))
        ).fetchone()
    return int(row[0]) if row else 0


class LangGraphWriter:
    """A ``pg_writer`` contender: one ``graph.invoke`` per agent step."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._exit = contextlib.ExitStack()
        self._url, self._schema = spec["url"], spec["schema"]
        saver: Any
        if spec.get("saver", "postgres") == "postgres":
            saver = self._exit.enter_context(
                PostgresSaver.from_conn_string(pg_server.with_search_path(self._url, self._schema))
            )
        else:
            store = safepoint.open_store(self._url, schema=self._schema)
            self._exit.callback(store.close)
            saver = SafepointSaver(store)
        self._steps = build_workload(spec).steps
        self._probes = set(spec.get("probes", ()))
        self._current: list[AgentStep] = []
        self._graph = build_graph(saver, self._current)
        self._config: RunnableConfig = {"configurable": {"thread_id": f"writer-{spec['index']}"}}
        self.seconds: list[float] = []
        self.probed: dict[str, dict[str, Any]] = {}  # turn -> {"bytes": …, "get_state": [seconds]}

    def block(self, count: int) -> int:
        done = 0
        while done < count and len(self.seconds) < len(self._steps):
            agent_step = self._steps[len(self.seconds)]
            self._current.append(agent_step)
            start = time.perf_counter()
            self._graph.invoke({"messages": [agent_step.incoming]}, self._config)
            self.seconds.append(time.perf_counter() - start)
            if agent_step.step in self._probes:
                self._probe(agent_step.step)
            self._current.clear()
            done += 1
        return done

    def _probe(self, turn: int) -> None:
        def load() -> None:
            if len(self._graph.get_state(self._config).values["messages"]) != 2 * turn:
                raise AssertionError(f"get_state after turn {turn} is not turn {turn}")

        self.probed[str(turn)] = {
            "bytes": schema_bytes(self._url, self._schema),
            "get_state": time_calls(load),
        }

    def result(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "probes": self.probed}

    def close(self) -> None:
        self._exit.close()
