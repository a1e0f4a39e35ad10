"""The ADK call journal under real SIGKILLs: no effect twice, no recorded response paid again.

The offline app (``helpers/adk_journal_agent.py``: ADK's real ``LlmAgent``
and ``Runner``, a scripted model, a transfer to a sub-agent, a
non-idempotent ``charge`` writing to a ``Ledger`` outside the database and
an idempotent ``lookup``) runs a 20-turn session in child processes
(``helpers/adk_journal_child.py``, streaming in every other process) that
are SIGKILLed right after a charge's effect and at random instants, each
resumed by a fresh process sending the cut turn's message again. With the
journal: 0 effects repeated, no model request paid twice beyond those the
journal counted as re-sent, the same answers, the same session events (each
once) and the same counters as an uninterrupted run — and the token
counters equal to what the fake model's ledger was paid, less the re-sent
calls, which the run shows apart. With the journal off the same kills
repeat payments, so these tests can fail. ``SAFEPOINT_SOAK=1`` runs
``test_soak_…``: at least 30 kills.

Children are forked from a forkserver that imported ADK once.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

import pytest

from helpers.adk_journal_child import child
from safepoint.crashrig.ledger import DuplicateEffect, Ledger

SEED = 33_2026
TURNS = 20
COUNTED = ("tokens_in", "tokens_out", "spend", "model_calls", "tool_calls")


@pytest.fixture(scope="module")
def forks() -> Any:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["helpers.adk_journal_warm"])
    return context


@dataclass
class Scenario:
    """One session's turns, killed and resumed in fresh processes until they end."""

    forks: Any
    work: Path
    journal: bool
    turns: int = TURNS
    kills: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)

    def start(self, kill_at: str | None = None, go: str | None = None) -> Any:
        process = self.forks.Process(
            target=child, args=(str(self.work), self.journal, self.turns, kill_at, go)
        )
        process.start()
        return process

    def ended(self, process: Any) -> None:
        process.join(120)
        assert process.exitcode in (0, -9), f"child {process.pid} failed ({process.exitcode})"
        if process.exitcode == -9:
            self.kills += 1
        else:
            self.results.append(json.loads((self.work / f"result-{process.pid}.json").read_text()))

    def kill_after_effect(self, key: str) -> None:
        self.ended(self.start(kill_at=key))

    def kill_at_random(self, rng: Random, span: float) -> None:
        process = self.start()
        ready = self.work / f"ready-{process.pid}"
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.001)
        time.sleep(rng.uniform(0.0, span))
        process.kill()
        self.ended(process)

    def finish(self) -> dict[str, Any]:
        self.ended(self.start())
        return self.results[-1]

    def ledger(self) -> Ledger:
        return Ledger(self.work / "ledger.db")

    def resent(self) -> int:
        log = self.work / "resent.log"
        return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture(scope="module")
def reference(forks: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The uninterrupted session: its events, counters, and how long it runs."""
    clean = Scenario(forks, tmp_path_factory.mktemp("reference"), journal=True)
    result = clean.finish()
    # Turn 1: triage 2 calls + specialist 2; turns 2-20: the specialist's 2 (tokens 10+k in, 5 out).
    assert {k: result["counters"][k] for k in COUNTED} == {
        "tokens_in": 42 + 19 * 21,
        "tokens_out": 20 + 19 * 10,
        "spend": 0.0,
        "model_calls": 4 + 19 * 2,
        "tool_calls": 5 + 19 * 2,
    }
    assert clean.ledger().check_calls() == (2 + 2 * TURNS, 4 + 2 * 19)
    assert clean.ledger().check_usage(result["counters"]) == {"tokens_in": 0, "tokens_out": 0}
    return result


def check_clean(run: Scenario, reference: dict[str, Any]) -> dict[str, int]:
    """What every journaled scenario must end with; what its kills cost (requests re-sent…)."""
    final = run.results[-1]
    assert final["events"] == reference["events"]  # the answers, and each event exactly once
    counters = final["counters"]
    assert {k: counters[k] for k in COUNTED} == {k: reference["counters"][k] for k in COUNTED}
    resent = run.resent()
    ledger = run.ledger()
    effects, paid = ledger.check_calls(resent=resent)  # DuplicateEffect if anything repeated
    assert effects == 2 + 2 * TURNS
    assert paid == 4 + 2 * 19 + ledger.repeated_model_calls()
    assert ledger.repeated_model_calls() <= resent
    assert counters["resent_calls"] <= resent
    assert final["entries"] == {k: counters[k] for k in ("tokens_in", "tokens_out")}  # each once
    again = ledger.check_usage(counters)  # paid = the counters + the requests in flight at kills, apart
    return {
        "kills": run.kills,
        "effects repeated": 0,  # check_calls raised otherwise
        "requests re-sent (logged)": resent,
        "requests re-sent (counted)": int(counters["resent_calls"]),
        "requests paid again": ledger.repeated_model_calls(),
        "tokens in paid again": again["tokens_in"],
        "tokens out paid again": again["tokens_out"],
    }


def next_payment(ledger: Ledger) -> int | None:
    """The turn whose specialist payment (``charge:7n``) has not happened yet, None after the last."""
    paid = {e.key for e in ledger.calls() if e.kind == "record"}
    return next((n for n in range(1, TURNS + 1) if f"charge:{7 * n}" not in paid), None)


def kills_with_the_journal(
    forks: Any, tmp_path: Path, reference: dict[str, Any], rng: Random, wanted: int
) -> dict[str, int]:
    """Kill 20-turn sessions with the journal on until ``wanted`` kills landed; the totals of
    ``check_clean`` over the sessions (``kills`` those that landed).

    For the next turn not paid yet: a kill right after its specialist's first model request
    reached the provider (in flight: re-sent, counted), one right after its payment, one at a
    random instant of the next process's first turns — until the session's turns run out.
    """
    span = 0.2 + 2 * reference["elapsed"] / TURNS  # the start of a process and a turn or two
    kills, episode, totals = 0, 0, Counter[str]()
    while kills < wanted:
        run = Scenario(forks, tmp_path / f"on-{episode}", journal=True)
        run.work.mkdir()
        while kills + run.kills < wanted and (turn := next_payment(run.ledger())) is not None:
            for kill_at in (f"specialist#0|ask:{turn}", f"charge:{7 * turn}", None):
                if kills + run.kills >= wanted:
                    break
                if kill_at and kill_at in {e.key for e in run.ledger().calls()}:
                    continue  # paid before the last kill (then recorded or in flight): no kill there
                run.kill_after_effect(kill_at) if kill_at else run.kill_at_random(rng, span)
        run.finish()
        totals.update(check_clean(run, reference))
        kills += run.kills
        episode += 1
    return {"sessions": episode, **totals}


def report(record_property: Any, name: str, totals: dict[str, int]) -> None:
    """The numbers a run measured: in the JUnit XML (``record_property``) and, with ``-s``, printed."""
    for key, value in totals.items():
        record_property(key, value)
    print(f"\n{name}: {totals}")


@pytest.mark.crash
def test_killed_with_the_journal_nothing_recorded_is_repeated(
    forks: Any, tmp_path: Path, reference: dict[str, Any], record_property: Any
) -> None:
    """Killed right after payments and at random instants, resumed in fresh processes each time:
    no payment twice, no recorded response paid again, the same events, answers and counters."""
    totals = kills_with_the_journal(forks, tmp_path, reference, Random(SEED), 15)
    report(record_property, "ADK journal on", totals)
    assert totals["kills"] >= 15


if os.environ.get("SAFEPOINT_SOAK"):

    @pytest.mark.crash
    def test_soak_killed_with_the_journal_30_times_nothing_recorded_is_repeated(
        forks: Any, tmp_path: Path, reference: dict[str, Any], record_property: Any
    ) -> None:
        """The same with at least 30 kills, from a fresh seed each run."""
        seed = time.time_ns()
        totals = kills_with_the_journal(forks, tmp_path, reference, Random(seed), 30)
        report(record_property, f"ADK journal on, soak (seed {seed})", totals)
        assert totals["kills"] >= 30


@pytest.mark.crash
def test_killed_without_the_journal_payments_repeat(forks: Any, tmp_path: Path, record_property: Any) -> None:
    """The same app on the same session service without the journal: the kills repeat payments
    (what the journal is for — and the proof the checks above can fail)."""
    run = Scenario(forks, tmp_path / "off", journal=False, turns=5)
    run.work.mkdir()
    for n in range(1, 6):
        run.kill_after_effect(f"charge:{7 * n}" if n > 1 else "charge:5")
    run.finish()
    assert run.kills >= 5
    with pytest.raises(DuplicateEffect):
        run.ledger().check_calls()
    repeated = {key for key, count in run.ledger().counts(("record",)).items() if count > 1}
    report(
        record_property,
        "ADK journal off",
        {
            "kills": run.kills,
            "effects repeated": len(repeated),
            "requests paid again": run.ledger().repeated_model_calls(),
        },
    )
    assert len(repeated) >= 5  # each kill right after a payment made it twice


@pytest.fixture(autouse=True)
def _no_leftover_children() -> Iterator[None]:
    yield
    for process in multiprocessing.active_children():
        process.kill()
