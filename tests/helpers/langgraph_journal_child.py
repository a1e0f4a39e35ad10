"""One process of the LangGraph journal's crash tests: runs (or resumes) the conversation.

``run`` opens the store and runs (or resumes) the conversation of
``langgraph_journal_app``, printing ``ready``, then ``result <json>`` and
``done`` to its output file (its stdout and stderr go there too). The tests
fork these processes from a forkserver that imported this module once
(``multiprocessing``'s ``set_forkserver_preload``, as the Agents SDK's crash
tests do): importing LangGraph takes seconds, and a forked child is still a
real, separate process that has run nothing — no store, no saver, no graph,
no patch installed. The tests SIGKILL children and read their exit codes.
"""

from __future__ import annotations

import asyncio
import json
import os
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
