"""What a crash costs an Agent Framework workflow, with and without the call journal, and what the
journal costs a turn (docs/journal-agent-framework.md).

    PYTHONPATH=src:tests .venv/bin/python bench/journal_agent_framework_cost.py [EPISODES] [TURNS]

The crash test's workflow (``tests/helpers/maf_journal_app.py``: two
``AgentExecutor``s, 5 model requests, 2 parallel payments and 2 lookups per
workflow run) checkpoints to SQLite through ``SafepointCheckpointStorage``. Each
episode runs one workflow run in a child process that is SIGKILLed once —
right after the first payment, right after the second, at a random
instant of the workflow run (from its first model request to its process's
exit), or right after the model was paid for the run's 4th request (its
answer lost) — then resumed from the latest checkpoint in a fresh process, with
the journal off (``workflow.run(checkpoint_id=…)``, the framework's own
resume) and on (the same through ``CallJournal.run``). Per kill point it
prints the mean, per kill, of payments made again, lookups run again, model
requests paid again and their tokens (as the scripted model reported them
to its ledger), and whether every run ended with the uninterrupted answer.

Then the journal's own cost: ``TURNS`` workflow runs in this process on one
SQLite file, each a fresh workflow as a new request builds it, timed with
``time.process_time`` (CPU seconds of this process: the framework, the
checkpoint storage and, when on, the journal's entries and lease), without
and with the journal.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path
from random import Random
from typing import Any

from helpers import maf_journal_app as app
from helpers.maf_journal_child import child
from safepoint import open_store
from safepoint.adapters.agent_framework import CallJournal, SafepointCheckpointStorage
from safepoint.crashrig.ledger import Ledger

POINTS = {
    "after payment 1": "payment#1",
    "after payment 2": "payment#2",
    "request 4 paid, answer lost": "request#4",
    "random instant": None,
}
REFERENCE_CALLS = 5  # model requests of one uninterrupted workflow run


def working(work: Path, process: Any) -> float:
    """Wait until ``process`` asked the model its first request (the workflow run is under way:
    a random kill before it would cut nothing); the time since it started."""
    started = time.monotonic()
    with Ledger(work / "ledger.db") as seen:  # made before the child: see one()
        while process.is_alive() and not any(call.kind == "model" for call in seen.calls()):
            time.sleep(0.001)
    return time.monotonic() - started


def one(
    forks: Any, work: Path, journal: bool, kill_at: str | None, *, rng: Random, span: float
) -> dict[str, Any]:
    Ledger(work / "ledger.db").close()  # made (WAL) before the child, so the parent can watch it
    process = forks.Process(target=child, args=(str(work), journal, 1, kill_at))
    process.start()
    if kill_at is None:
        working(work, process)
        time.sleep(rng.uniform(0.0, span))
        process.kill()
    process.join(60)
    killed = process.exitcode == -9
    resume = forks.Process(target=child, args=(str(work), journal, 1, None))
    resume.start()
    resume.join(60)
    result = json.loads((work / f"result-{resume.pid}.json").read_text())
    with Ledger(work / "ledger.db") as ledger:
        calls = ledger.calls()
        paid = [call for call in calls if call.kind == "model"]
        tokens = sum(call.value["tokens_in"] + call.value["tokens_out"] for call in paid)
        return {
            "killed": killed,
            "payments": sum(n - 1 for n in ledger.counts(("record",)).values()),
            "lookups": sum(1 for call in calls if call.kind == "once" and not call.applied),
            "models": len(paid) - REFERENCE_CALLS,
            "tokens": tokens,
            "answer": result["answer"],
        }


def crashes(episodes: int) -> None:
    forks = multiprocessing.get_context("forkserver")
    forks.set_forkserver_preload(["helpers.maf_journal_child"])
    rng = Random(33)
    with tempfile.TemporaryDirectory() as tmp:
        clean = Path(tmp) / "clean"
        clean.mkdir()
        Ledger(clean / "ledger.db").close()
        reference = forks.Process(target=child, args=(str(clean), True, 1, None))
        reference.start()
        working(clean, reference)
        under_way = time.monotonic()
        reference.join(60)
        span = time.monotonic() - under_way  # the workflow run, from its first request to exit
        ref = json.loads((clean / f"result-{reference.pid}.json").read_text())
        with Ledger(clean / "ledger.db") as ledger:
            ref_tokens = sum(
                c.value["tokens_in"] + c.value["tokens_out"] for c in ledger.calls() if c.kind == "model"
            )
        print(
            "| kill point | journal | kills | payments made again | lookups run again "
            "| model requests paid again | tokens paid again | answer |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for index, (point, kill_at) in enumerate(POINTS.items()):
            for journal in (False, True):
                rows = []
                for n in range(episodes):
                    work = Path(tmp) / f"{index}-{journal}-{n}"
                    work.mkdir()
                    rows.append(one(forks, work, journal, kill_at, rng=rng, span=span))
                kills = sum(r["killed"] for r in rows) or 1
                same = all(r["answer"] == ref["answer"] for r in rows)

                def mean(name: str, rows: list[dict[str, Any]] = rows, kills: int = kills) -> float:
                    return sum(r[name] for r in rows) / kills

                again = sum(r["tokens"] - ref_tokens for r in rows) / kills
                print(
                    f"| {point} | {'on' if journal else 'off'} | {sum(r['killed'] for r in rows)} "
                    f"| {mean('payments'):.2f} | {mean('lookups'):.2f} | {mean('models'):.2f} "
                    f"| {again:.1f} | {'same' if same else 'different'} |"
                )


async def turns(path: Path, count: int, journal: bool) -> float:
    """CPU seconds of ``count`` workflow runs on one SQLite file, journaled or not."""
    store = open_store(f"sqlite:///{path}")
    storage = SafepointCheckpointStorage(store)
    calls = CallJournal(storage)
    try:
        started = time.process_time()
        for n in range(count):
            workflow = app.build(storage)
            message = f"refund order {n}"
            result = await (calls.run(workflow, message) if journal else workflow.run(message))
            assert app.answer(result) == app.AUDITOR[-1]
        return time.process_time() - started
    finally:
        store.close()


def cost(count: int) -> None:
    app.LEDGER["ledger"] = None  # the tools and the model do no bookkeeping here
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(turns(Path(tmp) / "warm.db", 3, True))  # imports and first-use caches, untimed
        off = asyncio.run(turns(Path(tmp) / "off.db", count, False))
        on = asyncio.run(turns(Path(tmp) / "on.db", count, True))
    print()
    print("| journal | turns | CPU seconds per turn | added by the journal |")
    print("|---|---|---|---|")
    print(f"| off | {count} | {off / count * 1e3:.1f} ms | |")
    added = f"{(on - off) / count * 1e3:+.1f} ms ({on / off - 1:+.0%})"
    print(f"| on | {count} | {on / count * 1e3:.1f} ms | {added} |")


def main(episodes: int, count: int) -> None:
    crashes(episodes)
    cost(count)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10, int(sys.argv[2]) if len(sys.argv) > 2 else 40)
