"""The Pydantic AI call journal under real SIGKILLs: no effect twice, no recorded response paid again.

The offline shop (``helpers/pai_journal_agent.py``: Pydantic AI's real
``Agent`` on a scripted ``FunctionModel``, a non-idempotent ``charge`` writing
to a ``Ledger`` outside the database and an idempotent ``lookup``, two calls
in parallel per turn) runs a 20-turn conversation in child processes
(``helpers/pai_journal_child.py``) — each turn the app's load, run, save —
that are SIGKILLed right after a charge's effect and at random instants, each
resumed by a fresh process doing what the app always does. With the journal:
0 effects repeated, no model request paid twice beyond those the journal
counted as re-sent (in flight at a kill), the same answers and the same
conversation — each message once — as an uninterrupted run, and counters
equal to the usage of the responses the journal recorded, each counted once
(the model's own ledger = the counters + the re-sent requests, shown apart).
With the journal off the same kills repeat payments, so these tests can fail.
``SAFEPOINT_SOAK=1`` (``make soak``) runs ``test_soak_…``: at least 30 kills.

Children are forked from a forkserver that imported Pydantic AI once.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

import pytest

from helpers.pai_journal_agent import answer
from helpers.pai_journal_child import child
from safepoint.crashrig.ledger import DuplicateEffect, Ledger

SEED = 33_2027
TURNS = 20
COUNTED = ("tokens_in", "tokens_out", "spend", "model_calls", "tool_calls")


@pytest.fixture(scope="module")
def forks() -> Any:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["helpers.pai_journal_child"])
    return context


@dataclass
class Scenario:
    """One conversation, killed and resumed in fresh processes until all its turns are saved."""

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
        """Kill a fresh process at a random instant of what is left of the conversation (``span``:
        how long the whole of it runs)."""
        left = 1 - len(self.ledger().counts(("model",))) / (3 * self.turns)
        process = self.start()
        ready = self.work / f"ready-{process.pid}"
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.001)
        time.sleep(rng.uniform(0.0, span * max(left, 0.05)))
        process.kill()
        self.ended(process)

    def finish(self) -> dict[str, Any]:
        self.ended(self.start())
        return self.results[-1]

    def ledger(self) -> Ledger:
        return Ledger(self.work / "ledger.db")


def scenario(forks: Any, tmp_path: Path, name: str, *, journal: bool) -> Scenario:
    work = tmp_path / name
    work.mkdir()
    return Scenario(forks, work, journal)


@pytest.fixture(scope="module")
def reference(forks: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The uninterrupted conversation: its answers, history, counters, and how long it runs."""
    clean = scenario(forks, tmp_path_factory.mktemp("reference"), "clean", journal=True)
    result = clean.finish()
    assert result["answers"] == [answer(turn) for turn in range(TURNS)]
    assert len(result["messages"]) == 6 * TURNS
    assert result["counters"]["model_calls"] == 3 * TURNS
    assert result["counters"]["tool_calls"] == 3 * TURNS
    assert clean.ledger().check_calls() == (3 * TURNS, 3 * TURNS)
    return result


def model_usage(ledger: Ledger) -> tuple[int, int]:
    """What the model was paid for, every request it answered (repeats included)."""
    paid = [effect.value for effect in ledger.calls() if effect.kind == "model"]
    return sum(v["in"] for v in paid), sum(v["out"] for v in paid)


def check_clean(run: Scenario, reference: dict[str, Any]) -> int:
    """What every journaled conversation must end with; the model requests paid again."""
    final = run.results[-1]
    counters = final["counters"]
    assert final["answers"] == reference["answers"]
    assert final["messages"] == reference["messages"]  # each message once, as uninterrupted
    assert {k: counters[k] for k in COUNTED} == {k: reference["counters"][k] for k in COUNTED}
    # the run's tokens are the recorded responses' usage, each counted once
    assert [counters["tokens_in"], counters["tokens_out"]] == final["recorded_tokens"]
    ledger = run.ledger()
    effects, paid = ledger.check_calls(resent=counters["resent_calls"])  # DuplicateEffect if repeated
    assert effects == 3 * TURNS
    repeated = ledger.repeated_model_calls()
    assert paid == 3 * TURNS + repeated
    # the model's ledger = the counters + the re-sent requests, which the run shows apart
    paid_in, paid_out = model_usage(ledger)
    lost = (counters["lost_tokens_in_estimate"], counters["lost_tokens_out_estimate"])
    assert (paid_in - counters["tokens_in"], paid_out - counters["tokens_out"]) <= lost
    if repeated == counters["resent_calls"]:  # every re-sent request reached the model again
        assert (paid_in, paid_out) == (counters["tokens_in"] + lost[0], counters["tokens_out"] + lost[1])
    return repeated


def kills_with_the_journal(
    forks: Any, tmp_path: Path, reference: dict[str, Any], rng: Random, wanted: int
) -> tuple[int, int]:
    """Kill 20-turn conversations with the journal on until ``wanted`` kills landed: right after a
    charge at five turns, then at random instants. The kills, and the requests paid again."""
    span = reference["elapsed"] * 1.1
    kills, repeated, episode = 0, 0, 0
    while kills < wanted:
        run = scenario(forks, tmp_path, f"on-{episode}", journal=True)
        for turn in sorted(rng.sample(range(TURNS), 5)):  # the charge's effect made, its result not kept
            run.kill_after_effect(f"charge:{10 * turn + 1 + turn % 2}")
        while run.kills < min(wanted - kills, 15):
            run.kill_at_random(rng, span)
        run.finish()
        repeated += check_clean(run, reference)
        kills += run.kills
        episode += 1
    return kills, repeated


@pytest.mark.crash
def test_killed_with_the_journal_nothing_recorded_is_repeated(
    forks: Any, tmp_path: Path, reference: dict[str, Any]
) -> None:
    """A 20-turn conversation killed 15 times (right after five payments, then at random
    instants), resumed in fresh processes: no payment twice, no recorded response paid again,
    the same answers and history, counters from the recorded responses each counted once."""
    kills, _ = kills_with_the_journal(forks, tmp_path, reference, Random(SEED), 15)
    assert kills >= 15


# The long run, for make soak only (SAFEPOINT_SOAK=1): defined only then, so that make test
# (CI=true) collects no crash test it would skip.
if os.environ.get("SAFEPOINT_SOAK"):

    @pytest.mark.crash
    def test_soak_killed_with_the_journal_30_times_nothing_recorded_is_repeated(
        forks: Any, tmp_path: Path, reference: dict[str, Any]
    ) -> None:
        """The same with at least 30 kills, from a fresh seed each run."""
        kills, _ = kills_with_the_journal(forks, tmp_path, reference, Random(time.time_ns()), 30)
        assert kills >= 30


@pytest.mark.crash
def test_killed_without_the_journal_payments_repeat(
    forks: Any, tmp_path: Path, reference: dict[str, Any]
) -> None:
    """The same shop without the journal: a turn cut after a payment runs again from its start
    and pays again (what the journal is for — and the proof the checks above can fail)."""
    del reference
    run = scenario(forks, tmp_path, "off", journal=False)
    run.turns = 6
    for turn in range(5):
        run.kill_after_effect(f"charge:{10 * turn + 2}")
    final = run.finish()
    assert run.kills == 5
    assert final["answers"] == [answer(turn) for turn in range(6)]
    counts = run.ledger().counts()
    assert sum(n - 1 for n in counts.values()) == 10  # both charges of each cut turn, twice
    with pytest.raises(DuplicateEffect):
        run.ledger().check_calls()


@pytest.mark.crash
def test_two_processes_resuming_one_conversation_at_once_pay_once(
    forks: Any, tmp_path: Path, reference: dict[str, Any]
) -> None:
    """Killed after a payment, the conversation is resumed by two processes started together: one
    holds the turn, the other waits, then replays what the first recorded — no payment twice."""
    run = scenario(forks, tmp_path, "both", journal=True)
    run.turns = 2
    run.kill_after_effect("charge:12")
    go = run.work / "go"
    first, second = run.start(go=str(go)), run.start(go=str(go))
    for process in (first, second):
        while not (run.work / f"ready-{process.pid}").exists():
            time.sleep(0.001)
    go.touch()
    run.ended(first)
    run.ended(second)
    assert [r["answers"] for r in run.results] == [reference["answers"][:2]] * 2
    run.ledger().check_calls(resent=0)


@pytest.fixture(autouse=True)
def _no_leftover_children() -> Iterator[None]:
    yield
    for process in multiprocessing.active_children():
        process.kill()
