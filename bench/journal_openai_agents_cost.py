"""What a crash costs an Agents SDK app, with and without the call journal (docs/journal-openai-agents.md).

    PYTHONPATH=src:tests .venv/bin/python bench/journal_openai_agents_cost.py [EPISODES]

The crash test's app (``tests/helpers/oa_journal_agent.py``: 7 model calls,
2 payments, 2 lookups and an agent used as a tool per turn) runs one turn in
a child process that is SIGKILLed once — right after the first payment,
right after the second, or at a random instant of the turn — and then
resumed in a fresh process, with the journal off (``Runner.run`` again on
the same ``SafepointSession``, as an app without the journal would) and on.
Per kill point it prints the mean, per kill, of payments made again, lookups
run again, model requests paid again and the tokens and spend they cost (at
$2 per million input tokens and $8 per million output tokens), and whether
every journaled run ended with the uninterrupted answer and counters.
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path
from random import Random
from typing import Any

from helpers.oa_journal_child import child
from safepoint.crashrig.ledger import Ledger

PRICE_IN, PRICE_OUT = 2.0 / 1e6, 8.0 / 1e6  # dollars per token
REFERENCE_CALLS, REFERENCE_IN, REFERENCE_OUT = 7, 75, 35  # one uninterrupted turn
POINTS = ("after payment 1", "after payment 2", "random instant")


def one(forks: Any, work: Path, journal: bool, point: str, *, rng: Random, span: float) -> dict[str, Any]:
    kill_at = {"after payment 1": "charge:5", "after payment 2": "charge:7"}.get(point)
    process = forks.Process(target=child, args=(str(work), journal, "run", kill_at, None))
    process.start()
    if kill_at is None:
        while not (work / f"ready-{process.pid}").exists():
            time.sleep(0.001)
        time.sleep(rng.uniform(0.0, span))
        process.kill()
    process.join(60)
    killed = process.exitcode == -9
    resume = forks.Process(target=child, args=(str(work), journal, "run", None, None))
    resume.start()
    resume.join(60)
    result = json.loads((work / f"result-{resume.pid}.json").read_text())
    with Ledger(work / "ledger.db") as ledger:
        calls = ledger.calls()
        # Beyond the turn's 7 requests: without the journal the redone turn's requests carry the
        # repeated message too, so they are counted against the uninterrupted turn, not by key.
        paid = [call.key for call in calls if call.kind == "model"]
        tokens_in = sum(10 + int(key.split("#")[1].split("|")[0]) for key in paid) - REFERENCE_IN
        tokens_out = 5 * len(paid) - REFERENCE_OUT
        return {
            "killed": killed,
            "payments": sum(n - 1 for n in ledger.counts(("record",)).values()),
            "lookups": sum(1 for call in calls if call.kind == "once" and not call.applied),
            "models": len(paid) - REFERENCE_CALLS,
            "tokens": tokens_in + tokens_out,
            "spend": tokens_in * PRICE_IN + tokens_out * PRICE_OUT,
            "answer": result["answer"],
            "counters": result["counters"],
        }


def main(episodes: int) -> None:
    forks = multiprocessing.get_context("forkserver")
    forks.set_forkserver_preload(["helpers.oa_journal_child"])
    rng = Random(32)
    with tempfile.TemporaryDirectory() as tmp:
        clean = Path(tmp) / "clean"
        clean.mkdir()
        reference = forks.Process(target=child, args=(str(clean), True, "run", None, None))
        reference.start()
        reference.join(60)
        ref = json.loads((clean / f"result-{reference.pid}.json").read_text())
        print(
            "| kill point | journal | kills | payments made again | lookups run again "
            "| model requests paid again | tokens paid again | spend paid again | answer and counters |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for index, point in enumerate(POINTS):
            for journal in (False, True):
                rows = []
                for n in range(episodes):
                    work = Path(tmp) / f"{index}-{journal}-{n}"
                    work.mkdir()
                    rows.append(one(forks, work, journal, point, rng=rng, span=ref["elapsed"]))
                kills = sum(r["killed"] for r in rows) or 1
                same = all(
                    r["answer"] == ref["answer"]
                    and all(r["counters"].get(k) == ref["counters"][k] for k in ("tokens_in", "model_calls"))
                    for r in rows
                )

                def mean(name: str, rows: list[dict[str, Any]] = rows, kills: int = kills) -> float:
                    return sum(r[name] for r in rows) / kills

                print(
                    f"| {point} | {'on' if journal else 'off'} | {kills} | {mean('payments'):.2f} "
                    f"| {mean('lookups'):.2f} | {mean('models'):.2f} | {mean('tokens'):.1f} "
                    f"| ${mean('spend') * 1e6:.0f} per million turns | "
                    f"{'same' if same else 'different'} |"
                )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
