"""What a crash costs a Pydantic AI app, with and without the call journal (docs/journal-pydantic-ai.md).

    PYTHONPATH=src:tests .venv/bin/python bench/journal_pydantic_ai_cost.py [EPISODES]

The crash test's shop (``tests/helpers/pai_journal_agent.py``: per turn 3
model requests, a ``lookup`` and two ``charge`` payments, two calls in
parallel) runs a 3-turn conversation — each turn the app's load, run, save —
in a child process that is SIGKILLed once: right after the middle turn's
first payment, right after its second, right after its last model request
was paid (before the response is recorded; the scripted model takes 5 ms to
answer), or at a random instant from the process's first call on (drawn
again when the conversation ended first, so each episode has its kill). A
fresh process then finishes the conversation as the app always does, with
the journal off (before) and on (after). Per kill point, the mean per
episode of payments made again, lookups run again, model requests paid
again and the tokens they cost (and that at an illustrative $2 per million
input tokens and $8 per million output), and whether every episode ended
with the uninterrupted answers and — journal on — counters.
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

from helpers.pai_journal_child import child
from safepoint.crashrig.ledger import Ledger

TURNS = 3
PRICE_IN, PRICE_OUT = 2.0 / 1e6, 8.0 / 1e6  # dollars per token, for illustration only
POINTS = {
    "after payment 1": "charge:11",
    "after payment 2": "charge:12",
    "after a paid request": "t1:s2",
    "random instant": None,
}
COUNTED = ("tokens_in", "tokens_out", "model_calls", "tool_calls")
PRELOAD = ["pydantic_ai", "safepoint.adapters.pydantic_ai", "helpers.pai_journal_child"]


def _paid(ledger: Ledger) -> tuple[int, int, int]:
    requests = [call.value for call in ledger.calls() if call.kind == "model"]
    return len(requests), sum(r["tokens_in"] for r in requests), sum(r["tokens_out"] for r in requests)


def _run(forks: Any, work: Path, journal: bool, kill_at: str | None = None) -> Any:
    process = forks.Process(target=child, args=(str(work), journal, TURNS, kill_at, None))
    process.start()
    return process


def episode(forks: Any, work: Path, journal: bool, point: str, *, rng: Random, span: float) -> dict[str, Any]:
    process = _run(forks, work, journal, POINTS[point])
    if POINTS[point] is None:  # an instant from the process's first call on (before it, nothing is cut)
        while not (work / f"ready-{process.pid}").exists():
            time.sleep(0.001)
        with Ledger(work / "ledger.db") as ledger:
            while process.is_alive() and not any(e.pid == process.pid for e in ledger.calls()):
                time.sleep(0.001)
        time.sleep(rng.uniform(0.0, span))
        process.kill()
    process.join(60)
    resume = _run(forks, work, journal)
    resume.join(60)
    result = json.loads((work / f"result-{resume.pid}.json").read_text())
    with Ledger(work / "ledger.db") as ledger:
        requests, tokens_in, tokens_out = _paid(ledger)
        return {
            "killed": process.exitcode == -9,
            "payments": sum(n - 1 for n in ledger.counts(("record",)).values()),
            "lookups": sum(1 for call in ledger.calls() if call.kind == "once" and not call.applied),
            "requests": requests,
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "answers": result["answers"],
            "counters": result["counters"],
        }


def main(episodes: int) -> None:
    forks = multiprocessing.get_context("forkserver")
    forks.set_forkserver_preload(PRELOAD)
    rng = Random(33)
    with tempfile.TemporaryDirectory() as tmp:
        clean = Path(tmp) / "clean"
        clean.mkdir()
        reference = _run(forks, clean, True)
        reference.join(60)
        ref = json.loads((clean / f"result-{reference.pid}.json").read_text())
        with Ledger(clean / "ledger.db") as ledger:
            ref_requests, ref_in, ref_out = _paid(ledger)
        print(
            "| kill point | journal | kills | payments made again | lookups run again "
            "| model requests paid again | tokens paid again (in + out) | spend paid again "
            "| answers (and counters) as uninterrupted |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---|")
        for index, point in enumerate(POINTS):
            for journal in (False, True):
                rows = []
                for n in range(episodes):
                    for attempt in range(10):  # a random instant after the end is no kill: draw again
                        work = Path(tmp) / f"{index}-{journal}-{n}-{attempt}"
                        work.mkdir()
                        row = episode(forks, work, journal, point, rng=rng, span=ref["elapsed"])
                        if row["killed"]:
                            break
                    rows.append(row)
                kills = sum(r["killed"] for r in rows)
                same = all(
                    r["answers"] == ref["answers"]
                    and (not journal or all(r["counters"][k] == ref["counters"][k] for k in COUNTED))
                    for r in rows
                )

                def mean(value: Any, rows: list[dict[str, Any]] = rows) -> float:
                    return sum(value(r) for r in rows) / len(rows)

                again_in = mean(lambda r: r["tokens_in"] - ref_in)
                again_out = mean(lambda r: r["tokens_out"] - ref_out)
                print(
                    f"| {point} | {'on' if journal else 'off'} | {kills}/{len(rows)} "
                    f"| {mean(lambda r: r['payments']):.2f} | {mean(lambda r: r['lookups']):.2f} "
                    f"| {mean(lambda r: r['requests'] - ref_requests):.2f} "
                    f"| {again_in + again_out:.1f} ({again_in:.1f} + {again_out:.1f}) "
                    f"| ${(again_in * PRICE_IN + again_out * PRICE_OUT) * 1e6:.0f} per million episodes "
                    f"| {'same' if same else 'different'} |"
                )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
