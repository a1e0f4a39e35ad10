"""Processes of the LangGraph journal's crash tests: a child runs (or resumes) the conversation.

``run`` opens the store and runs (or resumes) the conversation of
``langgraph_journal_app``, printing ``ready``, then ``result <json>`` and
``done`` to its output file (its stdout and stderr go there too). The tests
fork these processes from a forkserver that imported this module once
(``multiprocessing``'s ``set_forkserver_preload``, as the Agents SDK's crash
tests do): importing LangGraph takes seconds, and a forked child is still a
real, separate process that has run nothing — no store, no saver, no graph,
no patch installed. The parent side (``forkserver``, ``Child``, ``Episode``:
children started, SIGKILLed as told, their results read) is here too, for the
tests and for ``bench/journal_langgraph_cost.py``.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import langgraph_journal_app as app_module
from safepoint import open_store
from safepoint.adapters.langgraph.layout import ThreadKey
from safepoint.crashrig.ledger import Ledger

THREAD = "crash-thread"


def child(args: dict[str, Any], out: Any) -> None:
    """One process's go at the conversation (``args``: db, ledger, mode, cache, durability,
    journal, turns, kill_after_charge, go, resume_only, delay)."""
    app_module.LEDGER.update(path=args["ledger"], kill_after_charge=args.get("kill_after_charge"))
    store = open_store(f"sqlite:///{args['db']}")
    saver = app_module.saver_for(store, args["journal"])
    mode = args.get("mode", "invoke")
    graph = app_module.build(
        saver,
        mode=mode,
        cache=args.get("cache", "none"),
        journal=args["journal"],
        delay=args.get("delay", 0.0),
    )
    config = {"configurable": {"thread_id": THREAD}}
    print("ready", file=out, flush=True)
    go = args.get("go")
    while go is not None and not Path(go).exists():  # started together with another child
        time.sleep(0.002)
    started = time.monotonic()
    durability = None if args["durability"] == "default" else args["durability"]  # None: LangGraph's own
    turns = args.get("turns", 2)
    if args.get("resume_only"):
        invoke = graph.ainvoke if mode in ("ainvoke", "astream") else graph.invoke
        outcome = invoke(None, config, durability=durability)
        if asyncio.iscoroutine(outcome):
            asyncio.run(outcome)
        answer = str(graph.get_state(config).values["messages"][-1].content)
    elif mode in ("ainvoke", "astream"):
        answer = asyncio.run(app_module.aconverse(graph, config, turns, durability))
    else:
        answer = app_module.converse(graph, config, turns, durability)
    result: dict[str, Any] = {"answer": answer, "elapsed": time.monotonic() - started}
    if saver.journal is not None:
        tally = saver.journal.tally(THREAD)
        seen = saver.journal.seen
        result.update(
            called=tally.called,
            tokens_in=tally.tokens_in,
            tokens_out=tally.tokens_out,
            spend=round(tally.spend, 9),
            resent=tally.resent,
            lost_tokens_in=tally.lost_tokens_in,
            divergences=tally.divergences,
            replayed=seen.replayed,
            reconciled=seen.reconciled,
            stored=store.load(ThreadKey(THREAD, "").thread_run).counters,  # what safepoint runs shows
        )
    print("result " + json.dumps(result), file=out, flush=True)
    store.close()
    print("done", file=out, flush=True)


def run(out_path: str, args: dict[str, Any]) -> None:
    """A child's whole life: its output to ``out_path``; exit code 1 on any error (traceback there)."""
    with open(out_path, "w", buffering=1) as out:
        fd = out.fileno()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        try:
            child(args, out)
        except BaseException:
            traceback.print_exc(file=out)
            out.flush()
            os._exit(1)


# -- the parent side: children started, killed and read --------------------------------------


@dataclass
class Child:
    process: Any  # a multiprocessing Process, forked from the forkserver
    out: Path

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def text(self) -> str:
        return self.out.read_text() if self.out.exists() else ""

    def wait_for(self, word: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(line.startswith(word) for line in self.text().splitlines()):
            assert time.monotonic() < deadline, f"no {word!r} from child {self.pid}:\n{self.text()}"
            assert self.process.exitcode is None, f"child {self.pid} ended:\n{self.text()}"
            time.sleep(0.002)

    def kill(self) -> None:
        self.process.kill()

    def end(self) -> int:
        self.process.join(120)
        status = self.process.exitcode
        assert status in (0, -signal.SIGKILL), f"child {self.pid} failed ({status}):\n{self.text()}"
        return int(status)

    def result(self) -> dict[str, Any]:
        for line in self.text().splitlines():
            if line.startswith("result "):
                found: dict[str, Any] = json.loads(line.removeprefix("result "))
                return found
        raise AssertionError(f"no result from child {self.pid}:\n{self.text()}")


def forkserver() -> Any:
    """A multiprocessing context whose children fork from a server that imported this module."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["helpers.langgraph_journal_child"])
    return context


def spawn(forks: Any, out: Path, args: dict[str, Any]) -> Child:
    process = forks.Process(target=run, args=(str(out), args))
    process.start()
    return Child(process, out)


@dataclass
class Episode:
    """One conversation on a fresh database, killed as told, then resumed to its end."""

    forks: Any
    folder: Path
    args: dict[str, Any]
    killed: int = 0
    children: int = 0
    result: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def start(cls, forks: Any, root: Path, name: str, **args: Any) -> Episode:
        folder = root / name
        folder.mkdir()
        base = {"db": str(folder / "state.db"), "ledger": str(folder / "ledger.db"), "turns": 2, **args}
        return cls(forks, folder, base)

    def _child(self, **extra: Any) -> Child:
        self.children += 1
        return spawn(self.forks, self.folder / f"child{self.children}.out", {**self.args, **extra})

    def kill_after_charge(self) -> bool:
        """A child SIGKILLed right after its first charge's effect (before anything records it)."""
        status = self._child(kill_after_charge=1).end()
        self.killed += status == -signal.SIGKILL
        return status == -signal.SIGKILL

    def kill_at(self, delay: float) -> bool:
        """A child SIGKILLed ``delay`` seconds into its run (False: it finished first)."""
        child = self._child()
        child.wait_for("ready")
        time.sleep(delay)
        child.kill()
        status = child.end()
        self.killed += status == -signal.SIGKILL
        return status == -signal.SIGKILL

    def finish(self) -> dict[str, Any]:
        child = self._child()
        assert child.end() == 0
        self.result = child.result()
        return self.result

    def ledger(self) -> Ledger:
        return Ledger(self.args["ledger"])
