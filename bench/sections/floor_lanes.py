"""What the floor section measures, lane by lane: issue 34's workload, its raw floors, and every way of
saving it (``floor_probe`` drives the lanes under a meter: callgrind's counts or process CPU time).

The issue's workload (``issue_steps``): each step adds a user message and an assistant reply of
``MESSAGE_CHARS`` characters of seeded random words (about 6.1 KB of JSON), sets three counters, one
cursor and a two-key state; with ``tools``, every ``TOOL_EVERY``-th step adds a ``TOOL_CHARS`` tool
output as well. The bench agent's (``agent_steps``) is ``workloads.agent``'s: 500 B messages and a
~50 KB tool output every tenth step.

A lane owns one file and one way of saving; ``step(n)`` does the caller's untimed work for step ``n``
(the step applied to the checkpoint, the copies of the fresh patterns) and returns the one call the
meter measures (the save, the put, the raw commit); ``load()`` returns a load of the latest state.
"""

from __future__ import annotations

import copy
import random
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from workloads import agent as agent_workload
from workloads.agent import random_text, random_word

import safepoint
from safepoint import Checkpoint, codec

MESSAGE_CHARS = 3000
TOOL_CHARS = 30_000
TOOL_EVERY = 10
SEED = 34

Message = dict[str, Any]
Call = Callable[[], object]


@dataclass(frozen=True, slots=True)
class Step:
    """What one agent step adds and sets."""

    messages: list[Message]
    counters: dict[str, int | float]
    cursor: dict[str, Any]
    state: dict[str, Any]

    def apply(self, cp: Checkpoint) -> None:
        cp.messages.extend(dict(m) for m in self.messages)  # the agent's own dicts, never shared
        cp.counters.update(self.counters)
        cp.cursors["main"] = self.cursor
        cp.state.update(self.state)

    def content(self) -> dict[str, Any]:
        """The step's new content, as the floor encodes it: messages, counters, cursor, state."""
        return {
            "messages": self.messages,
            "counters": self.counters,
            "cursor": self.cursor,
            "state": self.state,
        }


def issue_steps(count: int, *, tools: bool = False) -> list[Step]:
    """Steps 1..count of issue 34's workload (index i holds step i + 1)."""
    rng = random.Random(SEED)
    words = [random_word(rng) for _ in range(4096)]
    tokens_in = tokens_out = 0
    out = []
    for n in range(1, count + 1):
        messages: list[Message] = [
            {"role": "user", "content": random_text(rng, words, MESSAGE_CHARS)},
            {"role": "assistant", "content": random_text(rng, words, MESSAGE_CHARS)},
        ]
        if tools and n % TOOL_EVERY == 0:
            tool = {
                "role": "tool",
                "tool_call_id": f"call_{n}",
                "content": random_text(rng, words, TOOL_CHARS),
            }
            messages.insert(1, tool)
        tokens_in += 1200 + n % 17
        tokens_out += 600 + n % 11
        out.append(
            Step(
                messages=messages,
                counters={"tokens_in": tokens_in, "tokens_out": tokens_out, "steps": n},
                cursor={"offset": n * 2, "source": "chat"},
                state={"plan": f"subtask-{n % 13}", "attempt": n % 3},
            )
        )
    return out


def agent_steps(count: int) -> list[Step]:
    """Steps 1..count of the bench agent (``workloads.agent``), as ``Step``s."""
    return [Step(s.messages, dict(s.counters), s.cursor, s.state) for s in agent_workload.build(count).steps]


# -- the lanes ----------------------------------------------------------------------------------


@dataclass
class Lane:
    """One way of saving a workload on a file of its own, measured in ``windows`` (label -> steps)
    and, after each step in ``loads_at``, by loads of the latest state."""

    name: str
    steps: list[Step]
    windows: dict[str, range]
    loads_at: tuple[int, ...] = ()
    message_bytes: int = 0  # compact JSON bytes of every message saved so far
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def last(self) -> int:
        return max([*(max(w) for w in self.windows.values()), *self.loads_at])

    def advance(self, n: int) -> Call:
        """Step ``n``'s untimed work; the call to measure."""
        step = self.steps[n - 1]
        self.message_bytes += sum(len(orjson.dumps(m)) for m in step.messages)
        return self.step(n, step)

    def step(self, n: int, step: Step) -> Call:
        raise NotImplementedError

    def load(self, calls: int = 1) -> Call:
        """A call that loads the run's latest checkpoint, to be made ``calls`` times."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class RawLane(Lane):
    """Floor (c): one ``orjson.dumps`` of the step's new content, the store's digest function over it,
    one INSERT in a transaction on a WAL file (``synchronous`` as given: NORMAL for (c), FULL for
    (c2)); its load: SELECT every row's bytes in order and ``orjson.loads`` each."""

    def __init__(
        self, name: str, steps: list[Step], windows: dict[str, range], path: Path, sync: str, **kw: Any
    ):
        super().__init__(name, steps, windows, **kw)
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {sync}")
        self.conn.execute(
            "CREATE TABLE rows (id INTEGER PRIMARY KEY, run TEXT NOT NULL, step INTEGER NOT NULL,"
            " body BLOB NOT NULL, digest BLOB NOT NULL)"
        )

    def step(self, n: int, step: Step) -> Call:
        content, conn, digest = step.content(), self.conn, codec.digest

        def commit() -> None:
            body = orjson.dumps(content)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO rows (run, step, body, digest) VALUES (?, ?, ?, ?)", ("r", n, body, digest(body))
            )
            conn.execute("COMMIT")

        return commit

    def load(self, calls: int = 1) -> Call:
        conn = self.conn

        def read() -> list[Message]:
            messages: list[Message] = []
            for (body,) in conn.execute("SELECT body FROM rows WHERE run = ? ORDER BY id", ("r",)):
                messages.extend(orjson.loads(body)["messages"])
            return messages

        return read

    def close(self) -> None:
        self.conn.close()


class StoreLane(Lane):
    """safepoint's store, opened with ``options``; ``pattern``: "in place" (one checkpoint, ``next()``
    and the step applied), "list" (a new ``Checkpoint`` each step, ``messages=list(conversation)``) or
    "deep" (the same with ``copy.deepcopy`` of the conversation and the fields)."""

    def __init__(
        self,
        name: str,
        steps: list[Step],
        windows: dict[str, range],
        path: Path,
        *,
        pattern: str = "in place",
        options: dict[str, Any] | None = None,
        **kw: Any,
    ):
        super().__init__(name, steps, windows, **kw)
        self.url, self.options, self.pattern = f"sqlite:///{path}", options or {}, pattern
        self.store = safepoint.open_store(self.url, **self.options)
        self.cp = Checkpoint(run_id="r")  # a run begins at step 0: agent step n is checkpoint n - 1
        self.conversation: list[Message] = []
        self.fields: dict[str, Any] = {"counters": {}, "cursors": {}, "state": {}}
        self.readers: list[safepoint.Store] = []  # the load's store objects, one per load

    def step(self, n: int, step: Step) -> Call:
        if self.pattern == "in place":
            self.cp = self.cp.next() if n > 1 else self.cp
            step.apply(self.cp)
        else:
            self.conversation.extend(dict(m) for m in step.messages)
            self.fields["counters"].update(step.counters)
            self.fields["cursors"]["main"] = step.cursor
            self.fields["state"].update(step.state)
            if self.pattern == "list":
                messages, fields = list(self.conversation), {k: dict(v) for k, v in self.fields.items()}
            else:
                messages, fields = copy.deepcopy(self.conversation), copy.deepcopy(self.fields)
            self.cp = Checkpoint(
                run_id="r",
                step=n - 1,
                messages=messages,
                counters=fields["counters"],
                cursors=fields["cursors"],
                state=fields["state"],
            )
        store, cp = self.store, self.cp
        return lambda: store.save(cp)

    def load(self, calls: int = 1) -> Call:
        """A load of the run's latest checkpoint, each of the ``calls`` calls by a store object of
        its own, opened afresh on the file before any of them (outside the measured calls) and
        never having seen the run: a first load, as a fresh process resuming the run makes it. A
        store's later loads of the same run are cheaper (its verification memo); a resuming
        worker does not get those."""
        fresh = [safepoint.open_store(self.url, **self.options) for _ in range(calls)]
        self.readers.extend(fresh)
        return lambda: fresh.pop().load("r")

    def close(self) -> None:
        for reader in self.readers:
            reader.close()
        self.store.close()


class JournalLane(StoreLane):
    """The default store with the call journal present (a call recorded on another run) and none
    on this run: the named queries (``QueryLog``) of each measured save, kept in ``facts``."""

    def __init__(self, name: str, steps: list[Step], windows: dict[str, range], path: Path, **kw: Any):
        from safepoint.testing.conformance.query_log import QueryLog  # noqa: PLC0415

        super().__init__(name, steps, windows, path, **kw)
        self.store.save(Checkpoint(run_id="other"))
        self.store.call_intent("other", "turn-0/agent/0", request={"q": "order 1182"})
        self.store.record_call("other", "turn-0/agent/0", {"status": "shipped"}, request={"q": "order 1182"})
        self.log = QueryLog(self.store)
        self.facts["queries"] = []

    def step(self, n: int, step: Step) -> Call:
        save = super().step(n, step)
        measured = any(n in w for w in self.windows.values())
        log, queries = self.log, self.facts["queries"]

        def logged() -> None:
            log.take()
            save()
            if measured:
                queries.append([q.name for q in log.take()])

        return logged


class LangGraphLane(Lane):
    """LangGraph's ``SqliteSaver.put`` of the same state: the conversation, the counters, the cursor and
    the state as four channels, every one new each step (``put`` straight, no graph)."""

    def __init__(self, name: str, steps: list[Step], windows: dict[str, range], path: Path, **kw: Any):
        from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: PLC0415

        super().__init__(name, steps, windows, **kw)
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()
        self.config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        self.conversation: list[Message] = []
        self.counters: dict[str, Any] = {}
        self.state: dict[str, Any] = {}

    def step(self, n: int, step: Step) -> Call:
        from langgraph.checkpoint.base import empty_checkpoint  # noqa: PLC0415

        self.conversation.extend(dict(m) for m in step.messages)
        self.counters.update(step.counters)
        self.state.update(step.state)
        checkpoint = empty_checkpoint()
        values = {
            "messages": list(self.conversation),
            "counters": dict(self.counters),
            "cursor": step.cursor,
            "state": dict(self.state),
        }
        checkpoint["channel_values"] = values
        versions: dict[str, str | int | float] = dict.fromkeys(values, n)
        checkpoint["channel_versions"] = dict(versions)

        def put() -> None:
            self.config = self.saver.put(self.config, checkpoint, {"step": n}, versions)

        return put

    def close(self) -> None:
        self.conn.close()


class EmptyLane(Lane):
    """Nothing: what the meter's own calls cost around a measured call, subtracted from the others."""

    def step(self, n: int, step: Step) -> Call:
        return _nothing


def _nothing() -> None:
    return None
