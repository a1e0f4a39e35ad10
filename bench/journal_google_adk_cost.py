"""What a crash costs a Google ADK app, with and without the call journal (docs/journal-google-adk.md).

    PYTHONPATH=src:tests .venv/bin/python bench/journal_google_adk_cost.py [EPISODES]

The crash test's app (``tests/helpers/adk_journal_agent.py``: ADK's real
``Runner``, a triage agent and a specialist it transfers to, 4 model calls, 2
payments and 2 lookups in a turn) runs one turn in a child process that is
SIGKILLed once — right after the first payment, right after the second, right
after the last model request reached the provider (its answer not yet
recorded), or at a random instant of the turn — and then resumed in a fresh
process by sending the same message to the same session, with the journal off
(the app on ``SafepointSessionService`` alone, as it runs without the journal)
and on. Per kill point it prints the mean, per kill, of payments made again,
lookups run again, model requests paid again and the tokens and spend they
cost (at $2 per million input tokens and $8 per million output tokens: an
example price, given here as a user would give one), and whether every
journaled run ended with the uninterrupted run's session events and counters.
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

from helpers.adk_journal_child import child
from safepoint.crashrig.ledger import Ledger

PRICE_IN, PRICE_OUT = 2.0 / 1e6, 8.0 / 1e6  # dollars per token
POINTS = ("after payment 1", "after payment 2", "after the last request", "random instant")
KILL_AT = {
    "after payment 1": "charge:5",
    "after payment 2": "charge:7",
    "after the last request": "specialist#1|ask:1",
}
COUNTED = ("tokens_in", "tokens_out", "model_calls", "tool_calls")


def paid(ledger: Ledger) -> tuple[int, int, int]:
    """Model requests the provider was paid for, and their tokens (in, out)."""
    calls = [call for call in ledger.calls() if call.kind == "model"]
    return (
        len(calls),
        sum(int(call.value["tokens_in"]) for call in calls),
        sum(int(call.value["tokens_out"]) for call in calls),
    )


def one(
    forks: Any, work: Path, journal: bool, point: str, *, rng: Random, span: float, reference: dict[str, Any]
) -> dict[str, Any]:
    kill_at = KILL_AT.get(point)
    process = forks.Process(target=child, args=(str(work), journal, 1, kill_at, None))
    process.start()
    if kill_at is None:
        while not (work / f"ready-{process.pid}").exists():
            time.sleep(0.001)
        time.sleep(rng.uniform(0.0, span))
        process.kill()
    process.join(60)
    killed = process.exitcode == -9
    if killed:  # a random kill can come after the turn ended: then there is nothing to resume
        resume = forks.Process(target=child, args=(str(work), journal, 1, None, None))
        resume.start()
        resume.join(60)
        pid = resume.pid
    else:
        pid = process.pid
    result = json.loads((work / f"result-{pid}.json").read_text())
    with Ledger(work / "ledger.db") as ledger:
        calls = ledger.calls()
        requests, tokens_in, tokens_out = paid(ledger)
        requests -= reference["requests"]
        tokens_in -= reference["tokens_in"]
        tokens_out -= reference["tokens_out"]
        return {
            "killed": killed,
            "payments": sum(n - 1 for n in ledger.counts(("record",)).values()),
            "lookups": sum(1 for call in calls if call.kind == "once" and not call.applied),
            "models": requests,
            "tokens": tokens_in + tokens_out,
            "spend": tokens_in * PRICE_IN + tokens_out * PRICE_OUT,
            "same": result["events"] == reference["events"]
            and all(result["counters"].get(k) == reference["counters"][k] for k in COUNTED),
        }


def main(episodes: int) -> None:
    forks = multiprocessing.get_context("forkserver")
    forks.set_forkserver_preload(["helpers.adk_journal_warm"])
    rng = Random(33)
    with tempfile.TemporaryDirectory() as tmp:
        clean = Path(tmp) / "clean"
        clean.mkdir()
        process = forks.Process(target=child, args=(str(clean), True, 1, None, None))
        process.start()
        process.join(60)
        reference = json.loads((clean / f"result-{process.pid}.json").read_text())
        with Ledger(clean / "ledger.db") as ledger:
            requests, tokens_in, tokens_out = paid(ledger)
        reference.update(requests=requests, tokens_in=tokens_in, tokens_out=tokens_out)
        span = 0.05 + reference["elapsed"]  # the child's start, then its turn
        print(
            "| kill point | journal | kills | payments made again | lookups run again "
            "| model requests paid again | tokens paid again | spend paid again | events and counters |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for index, point in enumerate(POINTS):
            for journal in (False, True):
                rows = []
                for n in range(episodes):
                    work = Path(tmp) / f"{index}-{journal}-{n}"
                    work.mkdir()
                    rows.append(one(forks, work, journal, point, rng=rng, span=span, reference=reference))
                landed = [r for r in rows if r["killed"]]
                kills = len(landed) or 1

                def mean(name: str, landed: list[dict[str, Any]] = landed, kills: int = kills) -> float:
                    return sum(r[name] for r in landed) / kills

                same = all(r["same"] for r in rows)
                print(
                    f"| {point} | {'on' if journal else 'off'} | {len(landed)} | {mean('payments'):.2f} "
                    f"| {mean('lookups'):.2f} | {mean('models'):.2f} | {mean('tokens'):.1f} "
                    f"| ${mean('spend') * 1e6:.0f} per million kills | "
                    f"{'same' if same else 'different'} |"
                )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
