"""A deterministic scripted agent on the bare store: the workload of ``crash_loop``.

Nothing here is random or timed. The fake model's replies and token counts,
the tools' results and the batch of documents all derive from the run's seed
and the step (via sha256), and everything the agent needs to go on lives in
its checkpoint. So a run killed and resumed any number of times ends with
exactly the messages, counters and answer of an uninterrupted run — unless
the store lost or tore a committed step, or a step's work was done twice.

    >>> import safepoint
    >>> store = safepoint.open_store("memory://")
    >>> run_agent(store, "r1", total_steps=5).status
    <Status.DONE: 'done'>

Run as ``python -m safepoint.testing.crash.scripted_agent --store URL --run-id ID``
(``loop.AgentSpec`` builds that command) it is the child process of ``crash_loop``: it
prints ``saved <step>`` after each save and can pause at, or SIGKILL itself inside,
a chosen save.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import operator
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from safepoint.crashrig.fake_model import PRICE_IN, PRICE_OUT, derive, document_text, fake_model
from safepoint.crashrig.statements import StatementKiller
from safepoint.errors import NotFound
from safepoint.model import Checkpoint, Status
from safepoint.store import Store, open_store

Args = dict[str, Any]


def search(args: Args) -> str:
    """Three fake hits for ``args["query"]``."""
    return "; ".join(f"hit-{derive('search', args['query'], i).hex()[:10]}" for i in range(3))


def calculator(args: Args) -> str:
    """``a op b`` on integers — just enough arithmetic, with no ``eval``."""
    a, op, b = str(args["expression"]).split()
    return str({"+": operator.add, "-": operator.sub, "*": operator.mul}[op](int(a), int(b)))


def read_document(args: Args) -> str:
    """The text of batch document ``args["index"]``."""
    return document_text(int(args["seed"]), int(args["index"]))


TOOLS: dict[str, Callable[[Args], str]] = {
    "search": search,
    "calculator": calculator,
    "read_document": read_document,
}


def _plan(cp: Checkpoint, seed: int) -> tuple[str, Args]:
    """Which tool this step calls: the next batch document on odd steps while any are left."""
    batch = cp.cursors["batch"]
    if cp.step % 2 == 1 and batch["done"] < batch["total"]:
        return "read_document", {"seed": seed, "index": batch["done"]}
    h = derive("plan", seed, cp.step)
    if cp.step % 4 == 0:
        return "calculator", {"expression": f"{h[0]} * {h[1] + 1}"}
    return "search", {"query": f"topic {h[:3].hex()}"}


def _work_step(cp: Checkpoint) -> None:
    """One step of work on ``cp`` (already at its new step number)."""
    seed = int(cp.state["config"]["seed"])
    tool, args = _plan(cp, seed)
    reply = fake_model(seed, cp.step, str(cp.messages[-1]["content"]))
    call_id = f"call-{cp.step}"
    call = {"id": call_id, "name": tool, "arguments": args}
    cp.messages.append({"role": "assistant", "content": reply.text, "tool_calls": [call]})
    result = TOOLS[tool](args)
    cp.messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    c = cp.counters
    c["tokens_in"] = int(c["tokens_in"]) + reply.tokens_in
    c["tokens_out"] = int(c["tokens_out"]) + reply.tokens_out
    cost = (reply.tokens_in * PRICE_IN + reply.tokens_out * PRICE_OUT) / 1000
    c["spend"] = round(float(c["spend"]) + cost, 6)  # cents; rounded so it prints cleanly
    c["steps"] = int(c["steps"]) + 1
    if tool == "read_document":
        cp.cursors["batch"]["done"] += 1
        cp.state["findings"].append(result.split()[2])
    cp.state["work"] = derive(cp.state["work"], cp.step, tool, result).hex()[:16]


def answer_digest(cp: Checkpoint) -> str:
    """A digest of all the run's work: messages, counters, cursors and state."""
    work = {
        "messages": list(cp.messages),
        "counters": cp.counters,
        "cursors": cp.cursors,
        "state": {k: v for k, v in cp.state.items() if k != "answer"},
    }
    return hashlib.sha256(json.dumps(work, sort_keys=True).encode()).hexdigest()


def _start(run_id: str, seed: int, total_steps: int, documents: int) -> Checkpoint:
    cp = Checkpoint(run_id=run_id, labels={"agent": "scripted"})
    cp.messages.append({"role": "system", "content": "You are a careful research agent."})
    cp.messages.append({"role": "user", "content": f"Summarize the {documents} documents."})
    cp.counters.update({"tokens_in": 0, "tokens_out": 0, "spend": 0.0, "steps": 0})
    cp.cursors["batch"] = {"done": 0, "total": documents}
    config = {"seed": seed, "total_steps": total_steps, "documents": documents}
    cp.state.update({"config": config, "findings": [], "work": ""})
    return cp


def _finish_if_last(cp: Checkpoint) -> None:
    if cp.step == int(cp.state["config"]["total_steps"]) - 1:
        cp.status = Status.DONE
        cp.state["answer"] = answer_digest(cp)


class Journal:
    """An append-only file of step starts (``pid<TAB>run_id<TAB>step``), durable per line.

    Written *before* a step's work, so a crash test can tell which steps each
    process executed, including ones it never got to save.
    """

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self._fd = None if path is None else os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def step(self, run_id: str, step: int) -> None:
        if self._fd is not None:
            os.write(self._fd, f"{os.getpid()}\t{run_id}\t{step}\n".encode())  # one write: no torn line
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def run_agent(
    store: Store,
    run_id: str,
    *,
    total_steps: int = 60,
    seed: int = 0,
    documents: int = 20,
    on_step: Callable[[Checkpoint], None] | None = None,
    journal: str | os.PathLike[str] | None = None,
) -> Checkpoint:
    """Run (or resume) the scripted agent until its last step; return the final checkpoint.

    Saves steps 0 .. ``total_steps - 1``, one checkpoint per step, the last
    one ``DONE`` with ``state["answer"]``. If the run exists it resumes from
    its latest checkpoint, whose stored config (seed, total steps, documents)
    wins over the arguments. ``on_step`` sees each checkpoint after its save;
    ``journal`` names a file that gets one line per step started.
    """
    if total_steps < 1:
        raise ValueError(f"total_steps must be at least 1, not {total_steps}")
    cp: Checkpoint | None
    try:
        cp = store.load(run_id)
    except NotFound:
        cp = None
    log = Journal(journal)
    try:
        while cp is None or cp.status is not Status.DONE:
            log.step(run_id, 0 if cp is None else cp.step + 1)  # before any of the step's work
            if cp is None:
                cp = _start(run_id, seed, total_steps, documents)
            else:
                cp = cp.next()
                _work_step(cp)
            _finish_if_last(cp)
            store.save(cp)
            if on_step is not None:
                on_step(cp)
        return cp
    finally:
        log.close()


def main(argv: list[str] | None = None) -> int:
    """The crash-test child: run the agent, print ``saved <step>`` after each save."""
    p = argparse.ArgumentParser(prog="python -m safepoint.testing.crash.scripted_agent")
    p.add_argument("--store", required=True, help="store URL")
    p.add_argument("--run-id", required=True)
    p.add_argument("--total-steps", type=int, default=60)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--documents", type=int, default=20)
    p.add_argument("--journal", type=Path, help="append one line per step started")
    p.add_argument("--pause-after", type=int, help="after saving this step, block on stdin")
    p.add_argument("--kill-in-save", help="SAVE:STATEMENT — SIGKILL self inside that save")
    a = p.parse_args(argv)
    killer = None
    if a.kill_in_save:
        save, statement = (int(x) for x in a.kill_in_save.split(":"))
        killer = StatementKiller(save, statement)

    def on_step(cp: Checkpoint) -> None:
        print(f"saved {cp.step}", flush=True)
        if cp.step == a.pause_after:
            print(f"paused {cp.step}", flush=True)
            sys.stdin.readline()  # the parent SIGKILLs us here, exactly at the boundary

    with open_store(a.store, **({} if killer is None else {"trace": killer})) as store:
        if killer is not None:
            killer.armed = True
        config = {"total_steps": a.total_steps, "seed": a.seed, "documents": a.documents}
        cp = run_agent(store, a.run_id, on_step=on_step, journal=a.journal, **config)
    print(f"done {cp.step} {cp.state['answer']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
