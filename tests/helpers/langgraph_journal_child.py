"""Child processes for the LangGraph call journal's crash tests, forked from one that imported once.

Importing LangGraph takes seconds; the crash tests start dozens of
processes. So one *zygote* (``python -m helpers.langgraph_journal_child``)
imports everything and then, on each command read from its stdin, forks a
child: a real, separate process that has run nothing yet — no store, no
saver, no graph, no patch installed — which opens the store and runs (or
resumes) the conversation, printing ``ready``, then ``result <json>`` and
``done`` to its own output file. The test SIGKILLs children by pid and asks
the zygote to reap them (``wait``), which answers with the exit status.

Commands (one JSON object a line): ``{"op": "spawn", "out": path, "args": {...}}``
→ ``{"pid": n}``; ``{"op": "wait", "pid": n}`` → ``{"status": code}`` (negative:
the signal that ended it); ``{"op": "quit"}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from helpers import langgraph_journal_app as app_module
from safepoint import open_store

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
        )
    print("result " + json.dumps(result), file=out, flush=True)
    store.close()
    print("done", file=out, flush=True)


def _spawn(command: dict[str, Any]) -> int:
    pid = os.fork()
    if pid:
        return pid
    status = 0
    try:
        with open(command["out"], "w", buffering=1) as out:
            fd = out.fileno()
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            try:
                child(command["args"], out)
            except BaseException:
                traceback.print_exc(file=out)
                out.flush()
                status = 1
    finally:
        os._exit(status)


def serve() -> None:
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "spawn":
            reply: dict[str, Any] = {"pid": _spawn(command)}
        elif command["op"] == "wait":
            _, status = os.waitpid(command["pid"], 0)
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            reply = {"status": code}
        else:
            return
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    serve()
