"""The Agents SDK call journal under real SIGKILLs: no effect twice, no recorded response paid again.

The offline app (``helpers/oa_journal_agent.py``: the SDK's real ``Agent``
and ``Runner``, scripted models — one given by name — a handoff, an agent
used as a tool, a non-idempotent ``charge`` writing to a ``Ledger`` outside
the database and an idempotent ``lookup``) runs one turn in child processes
(``helpers/oa_journal_child.py``) that are SIGKILLed right after a charge's
effect and at random instants, each resumed by a fresh process. With the
journal: 0 effects repeated, no model request paid twice beyond those the
journal counted as re-sent (in flight at a kill), the same final answer and
the same counters as an uninterrupted run. With the journal off the same
kills repeat payments, so these tests can fail. ``SAFEPOINT_SOAK=1`` (``make
soak``) runs the long variant, ``test_soak_…``: at least 30 kills with the
journal on.

Children are forked from a forkserver that imported the SDK once (importing
it takes seconds on a small machine); each is a separate process that has
run nothing before its turn.
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

from helpers.oa_journal_agent import ANSWER
from helpers.oa_journal_child import child
from safepoint.crashrig.ledger import DuplicateEffect, Ledger

SEED = 32_2027
COUNTED = ("tokens_in", "tokens_out", "spend", "model_calls", "tool_calls")
KILL_POINTS = ("charge:5", "charge:7")


@pytest.fixture(scope="module")
def forks() -> Any:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["helpers.oa_journal_child"])
    return context


@dataclass
class Scenario:
    """One session's turn, killed and resumed in fresh processes until it ends."""

    forks: Any
    work: Path
    journal: bool
    mode: str = "run"
    turns: int = 1
    kills: int = 0
    killed_mid_turn: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)

    def start(self, kill_at: str | None = None, go: str | None = None) -> Any:
        process = self.forks.Process(
            target=child,
            args=(str(self.work), self.journal, self.mode, kill_at, go),
            kwargs={"turns": self.turns},
        )
        process.start()
        return process

    def ended(self, process: Any) -> None:
        process.join(60)
        assert process.exitcode in (0, -9), f"child {process.pid} failed ({process.exitcode})"
        if process.exitcode == -9:
            self.kills += 1
        else:
            found = self.work / f"result-{process.pid}.json"
            self.results.append(json.loads(found.read_text()))

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
        before = len(self.ledger().calls())
        process.kill()
        self.ended(process)
        self.killed_mid_turn += process.exitcode == -9 and before > 0

    def finish(self) -> dict[str, Any]:
        self.ended(self.start())
        return self.results[-1]

    def ledger(self) -> Ledger:
        return Ledger(self.work / "ledger.db")

    def resent(self) -> int:
        log = self.work / "resent.log"
        return len(log.read_text().splitlines()) if log.exists() else 0


def scenario(
    forks: Any, tmp_path: Path, name: str, *, journal: bool, mode: str = "run", turns: int = 1
) -> Scenario:
    work = tmp_path / name
    work.mkdir()
    return Scenario(forks, work, journal, mode, turns)


@pytest.fixture(scope="module")
def reference(forks: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The uninterrupted turn: its answer, counters, and how long it runs."""
    clean = scenario(forks, tmp_path_factory.mktemp("reference"), "clean", journal=True)
    result = clean.finish()
    assert result["answer"] == ANSWER
    assert {k: result["counters"][k] for k in COUNTED} == {
        "tokens_in": 75,
        "tokens_out": 35,
        "spend": 0.0,
        "model_calls": 7,
        "tool_calls": 4,
    }
    assert clean.ledger().check_calls() == (4, 7)
    assert clean.ledger().check_usage(result["counters"]) == {"tokens_in": 0, "tokens_out": 0}
    return result


def check_clean(run: Scenario, reference: dict[str, Any]) -> int:
    """What every journaled scenario must end with; the model calls it re-sent."""
    final = run.results[-1]
    assert final["answer"] == reference["answer"]
    assert {k: final["counters"][k] for k in COUNTED} == {k: reference["counters"][k] for k in COUNTED}
    assert final["items"] == reference["items"]
    resent = run.resent()
    ledger = run.ledger()
    effects, paid = ledger.check_calls(resent=resent)  # DuplicateEffect if anything repeated
    assert effects == 2 * run.turns + 2  # two payments a turn; the lookups are the same every turn
    assert paid == 7 * run.turns + ledger.repeated_model_calls()
    assert final["counters"]["resent_calls"] <= resent
    ledger.check_usage(final["counters"])  # paid = the counters + the requests in flight at kills
    return resent


def kills_with_the_journal(
    forks: Any, tmp_path: Path, reference: dict[str, Any], rng: Random, wanted: int
) -> int:
    """Kill episodes with the journal on until ``wanted`` kills landed; the kills."""
    span = reference["elapsed"] * 1.2
    kills, episode = 0, 0
    while kills < wanted:
        mode = ("run", "streamed")[episode % 2]
        run = scenario(forks, tmp_path, f"on-{episode}", journal=True, mode=mode)
        run.kill_after_effect(KILL_POINTS[episode % 2])  # right after a payment, every episode
        for _ in range(rng.randint(1, 3)):  # then at random instants, resumed each time
            run.kill_at_random(rng, span)
        run.finish()
        check_clean(run, reference)
        assert run.kills >= 1
        kills += run.kills
        episode += 1
    return kills


@pytest.mark.crash
def test_killed_with_the_journal_nothing_recorded_is_repeated(
    forks: Any, tmp_path: Path, reference: dict[str, Any]
) -> None:
    """Killed right after each payment and at random instants, resumed in fresh processes each
    time: no payment twice, no recorded response paid again, the same answer and counters.
    (5 kills here and 10 in the long conversation below: 15 in make test.)"""
    assert kills_with_the_journal(forks, tmp_path, reference, Random(SEED), 5) >= 5


@pytest.mark.crash
def test_a_long_conversation_killed_ten_times_counts_each_response_once(forks: Any, tmp_path: Path) -> None:
    """20 turns, SIGKILLed 10 times at random instants (each resumed in a fresh process): nothing
    repeated, the same session items, and the counters — what ``safepoint runs`` shows — count
    each recorded response once; the provider was paid those plus the requests in flight."""
    clean = scenario(forks, tmp_path, "long-reference", journal=True, turns=20)
    reference = clean.finish()
    assert reference["counters"]["model_calls"] == 7 * 20
    assert clean.ledger().check_usage(reference["counters"]) == {"tokens_in": 0, "tokens_out": 0}
    rng = Random(SEED + 20)
    run = scenario(forks, tmp_path, "long", journal=True, turns=20)
    attempts = 0
    while run.kills < 10:  # short delays: each process gets a little further before its kill
        attempts += 1
        assert attempts < 40, "the kills stopped landing: the conversation ended first"
        run.kill_at_random(rng, reference["elapsed"] / 12)
    run.finish()
    check_clean(run, reference)


@pytest.mark.crash
@pytest.mark.parametrize("mode", ["run", "streamed"])
def test_killed_after_re_sending_a_request_the_re_send_is_counted(
    forks: Any, tmp_path: Path, reference: dict[str, Any], mode: str
) -> None:
    """Killed while the specialist's first request is in flight, then killed again right after the
    resumed process re-sent it — before the session's next save: the counters still count both
    requests paid again (the re-send is noted in the journal before it is sent)."""
    run = scenario(forks, tmp_path, f"resent-{mode}", journal=True, mode=mode)
    run.kill_after_effect("model:specialist#0")  # in flight: its intent written, no response
    run.kill_after_effect("model:specialist#0")  # re-sent, paid, killed before any save
    assert run.kills == 2
    run.finish()  # re-sends it once more
    assert run.ledger().repeated_model_calls() == 2
    check_clean(run, reference)
    assert run.results[-1]["counters"]["resent_calls"] == 2


# The long run, for make soak only (SAFEPOINT_SOAK=1): defined only then, so that make test
# (CI=true) collects no crash test it would skip.
if os.environ.get("SAFEPOINT_SOAK"):

    @pytest.mark.crash
    def test_soak_killed_with_the_journal_30_times_nothing_recorded_is_repeated(
        forks: Any, tmp_path: Path, reference: dict[str, Any]
    ) -> None:
        """The same with at least 30 kills, from a fresh seed each run."""
        assert kills_with_the_journal(forks, tmp_path, reference, Random(time.time_ns()), 30) >= 30


@pytest.mark.crash
def test_killed_without_the_journal_payments_repeat(
    forks: Any, tmp_path: Path, reference: dict[str, Any]
) -> None:
    """The same app on the same session without the journal: the kills repeat payments (what the
    journal is for — and the proof the checks above can fail)."""
    rng, kills, episodes, repeated = Random(SEED + 1), 0, 0, 0
    while kills < 5:
        run = scenario(forks, tmp_path, f"off-{episodes}", journal=False)
        run.kill_after_effect(KILL_POINTS[episodes % 2])
        run.kill_at_random(rng, reference["elapsed"])
        run.finish()
        kills += run.kills
        episodes += 1
        try:
            run.ledger().check_calls()
        except DuplicateEffect:
            repeated += 1
    assert repeated == episodes  # each episode's kill right after a payment made it twice


@pytest.mark.crash
def test_two_processes_resuming_one_session_at_once_pay_once(
    forks: Any, tmp_path: Path, reference: dict[str, Any]
) -> None:
    """Killed after a payment, the turn is resumed by two processes started together: one holds
    the session, the other waits, then replays the finished turn — no payment twice."""
    run = scenario(forks, tmp_path, "both", journal=True)
    run.kill_after_effect("charge:7")
    go = run.work / "go"
    first, second = run.start(go=str(go)), run.start(go=str(go))
    for process in (first, second):
        while not (run.work / f"ready-{process.pid}").exists():
            time.sleep(0.001)
    go.touch()
    run.ended(first)
    run.ended(second)
    check_clean(run, reference)
    assert [r["answer"] for r in run.results] == [ANSWER, ANSWER]
    assert sorted(r["called"] for r in run.results) == [0, 1]  # the second made no call at all


@pytest.fixture(autouse=True)
def _no_leftover_children() -> Iterator[None]:
    yield
    for process in multiprocessing.active_children():
        process.kill()
