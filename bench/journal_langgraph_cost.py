"""What a crash costs a LangGraph app, with and without the call journal (docs/journal-langgraph.md).

    PYTHONPATH=src:tests .venv/bin/python bench/journal_langgraph_cost.py [EPISODES]

The crash test's app (``tests/helpers/langgraph_journal_app.py``: a real
``StateGraph``, a scripted offline model; per turn a non-idempotent
``charge`` writing to a ledger outside the database and two idempotent
``lookup``s; two turns, six model requests) runs in child processes SIGKILLed
twice per episode — right after a charge's effect, or at random instants —
then resumed to its end in a fresh process, with the journal off (the same
``SafepointSaver`` without it: LangGraph's own resume) and on, under the
default durability and ``durability="sync"``; the model's path and cache
setting drawn at random. Per row it prints the kills that landed, the charges
made again, the model requests paid again (requests that reached the
scripted provider twice at the same place in the conversation) and the input
tokens they cost, and, with the journal on, how many of them the journal
counted as re-sent (in flight at a kill: the one honest gap) and whether every
episode ended with the uninterrupted run's answer and counters.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from random import Random
from typing import Any

from helpers.langgraph_journal_child import Episode, forkserver

MODES = ("invoke", "ainvoke", "stream", "astream")
CACHES = ("none", "global", "true", "false", "instance")
COUNTERS = ("called", "tokens_in", "tokens_out", "spend")


def episode(
    forks: Any, root: Path, name: str, *, point: str, rng: Random, horizon: float, **args: Any
) -> Any:
    run = Episode.start(forks, root, name, mode=rng.choice(MODES), cache=rng.choice(CACHES), **args)
    for _ in range(2):
        if point == "after the charge":
            run.kill_after_charge()
        else:
            run.kill_at(rng.uniform(0, horizon))
    run.finish()
    return run


def main(episodes: int) -> None:
    forks = forkserver()
    rng = Random(32)
    print(
        "| durability | kill point | journal | kills | charges made again "
        "| model requests paid again (input tokens) | of them counted as re-sent | answer and counters |"
    )
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for durability in ("default", "sync"):
            clean = Episode.start(forks, root, f"clean-{durability}", durability=durability, journal=True)
            ref = clean.finish()
            for point in ("after the charge", "random instants"):
                for journal in (False, True):
                    kills = charges = paid = tokens = resent = 0
                    same = True
                    for n in range(episodes):
                        name = f"{durability}-{point[:5]}-{journal}-{n}"
                        args = {"durability": durability, "journal": journal}
                        horizon = ref["elapsed"] * 1.3
                        run = episode(forks, root, name, point=point, rng=rng, horizon=horizon, **args)
                        kills += run.killed
                        with run.ledger() as ledger:
                            charges += sum(n - 1 for n in ledger.counts(("record",)).values())
                            seen: set[str] = set()
                            for call in ledger.calls():
                                if call.kind == "model":
                                    paid += call.key in seen
                                    tokens += 7 * call.value["messages"] if call.key in seen else 0
                                    seen.add(call.key)
                        if journal:
                            resent += run.result["resent"]
                            same &= run.result["answer"] == ref["answer"]
                            same &= all(run.result[k] == ref[k] for k in COUNTERS)
                    verdict = ("all the same" if same else "DIFFERENT") if journal else "-"
                    print(
                        f"| {durability} | {point} | {'on' if journal else 'off'} | {kills} | {charges} "
                        f"| {paid} ({tokens}) | {resent if journal else '-'} | {verdict} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
