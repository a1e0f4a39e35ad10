"""The Agent Framework call journal under real SIGKILLs: nothing recorded is paid or done twice.

A real workflow (``helpers/maf_journal_app.py``: two ``AgentExecutor``s, scripted
offline models, an idempotent ``lookup`` and a non-idempotent ``charge`` writing
to a ledger outside the database) runs one workflow run per *turn* of one
workflow — each ``CallJournal.run(workflow, message)`` is a turn, and the
workflow's turns are one safepoint run (``agent-framework/orders``) — in
child processes killed right after a payment and at random instants, each
resumed by a fresh process from the latest checkpoint. With the journal
(15 kills in ``make test``: 10 in a 20-turn run, 5 more killing resumes
again): 0 payments repeated, no model request paid twice beyond those the
journal counted as re-sent, the uninterrupted run's answers; the run's token
counters equal the usage of the responses the journal recorded, each once,
and the fake model was paid the counters plus the re-sent calls
(``Ledger.check_usage``; shown apart in ``lost_*``). Without the journal the
kills repeat payments, so these tests can fail. ``SAFEPOINT_SOAK=1`` (``make
soak``) adds the >= 30-kill run.

Children are forked from a forkserver that imported the framework once.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

import pytest

import safepoint
from helpers import maf_journal_app as app
from helpers.maf_journal_child import child
from safepoint.testing.crash import DuplicateEffect, Ledger

SEED = 33_2026
# The conversation's kill points in turn (see ``maf_journal_child``): None is a random instant.
KILLS = ("payment#1", "request#4", None, "payment#2")
COUNTED = ("tokens_in", "tokens_out", "model_calls", "tool_calls")


@pytest.fixture(scope="module")
def forks() -> Any:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["helpers.maf_journal_child"])
    return context


@dataclass
class Workflow:
    """Turns of one workflow, each killed and resumed in fresh processes until it ends."""

    forks: Any
    work: Path
    journal: bool
    kills: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)
    paid_again: dict[str, int] = field(default_factory=dict)  # tokens of requests paid twice

    def start(self, turn: int, kill_at: str | None = None, go: str | None = None) -> Any:
        process = self.forks.Process(target=child, args=(str(self.work), self.journal, turn, kill_at, go))
        process.start()
        return process

    def ended(self, process: Any) -> None:
        process.join(60)
        assert process.exitcode in (0, -9), f"child {process.pid} failed ({process.exitcode})"
        if process.exitcode == -9:
            self.kills += 1
        else:
            self.results.append(json.loads((self.work / f"result-{process.pid}.json").read_text()))

    def under_way(self, process: Any) -> float:
        """Wait until ``process`` made its first call the ledger sees (a request paid, a tool run):
        a random kill before it would cut nothing. The time it was seen (or the process ended)."""
        with self.ledger() as ledger:
            before = len(ledger.calls())
            deadline = time.monotonic() + 60
            while process.is_alive() and len(ledger.calls()) == before:
                assert time.monotonic() < deadline, "the child never got under way"
                time.sleep(0.001)
        return time.monotonic()

    def kill_at_random(self, turn: int, rng: Random, span: float) -> None:
        """Start turn ``turn``'s process and kill it at a random instant of the ``span`` seconds
        after its first call (a resume with nothing left to call ends untouched)."""
        process = self.start(turn)
        self.under_way(process)
        time.sleep(rng.uniform(0.0, span))
        process.kill()
        self.ended(process)

    def finish(self, turn: int) -> dict[str, Any]:
        self.ended(self.start(turn))
        return self.results[-1]

    def ledger(self) -> Ledger:
        return Ledger(self.work / "ledger.db")

    def summary(self) -> str:
        return f"{self.kills} kills, {self.resent()} re-sent, tokens paid again {self.paid_again}"

    def resent(self) -> int:
        log = self.work / "resent.log"
        return len(log.read_text().splitlines()) if log.exists() else 0


def workflow(forks: Any, tmp_path: Path, name: str, *, journal: bool) -> Workflow:
    work = tmp_path / name
    work.mkdir()
    Ledger(work / "ledger.db").close()  # made (WAL) before any child, so the test can watch it
    return Workflow(forks, work, journal)


@pytest.fixture(scope="module")
def reference(forks: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two uninterrupted turns: the answer, the counters per turn, how long a run is under way."""
    clean = workflow(forks, tmp_path_factory.mktemp("reference"), "clean", journal=True)
    process = clean.start(1)
    under_way = clean.under_way(process)
    clean.ended(process)
    span = time.monotonic() - under_way  # a workflow run, from its first call to its exit
    first, second = clean.results[-1], clean.finish(2)
    assert first["answer"] == second["answer"] == app.AUDITOR[-1]
    per_turn = {k: second["counters"][k] - first["counters"][k] for k in COUNTED}
    assert per_turn["model_calls"] == 5
    assert per_turn["tool_calls"] == 4
    assert clean.ledger().check_calls() == (8, 10)
    assert clean.ledger().check_usage(second["counters"]) == {"tokens_in": 0, "tokens_out": 0}
    return {"answer": first["answer"], "per_turn": per_turn, "span": span}


def recorded_usage(work: Path) -> tuple[int, int, int]:
    """Tokens in and out over the responses the journal recorded (each once), and their count."""
    store = safepoint.open_store(f"sqlite:///{work / 'state.db'}")
    try:
        entries = [e for e in store.recorded_calls(app.RUN_ID) if e.done and "|model#" in e.key]
        return (
            sum(e.usage.tokens_in for e in entries if e.usage),
            sum(e.usage.tokens_out for e in entries if e.usage),
            len(entries),
        )
    finally:
        store.close()


def check_run(run: Workflow, reference: dict[str, Any], turns: int) -> dict[str, int]:
    """What every journaled workflow must end with after ``turns`` turns, whatever was killed;
    the tokens paid again (requests in flight at kills)."""
    final = run.results[-1]["counters"]
    # Counters: one count per recorded call, whatever was replayed; the crash cost apart.
    for name in COUNTED:
        assert final[name] == reference["per_turn"][name] * turns, name
    tokens_in, tokens_out, responses = recorded_usage(run.work)
    assert (final["tokens_in"], final["tokens_out"], final["model_calls"]) == (
        tokens_in,
        tokens_out,
        responses,
    )
    resent = run.resent()
    ledger = run.ledger()
    effects, paid = ledger.check_calls(resent=resent)  # DuplicateEffect if a payment repeated
    assert effects == 4 * turns
    assert paid == 5 * turns + ledger.repeated_model_calls()
    assert final["resent_calls"] <= resent
    return ledger.check_usage(final)  # paid = the counters + the requests in flight at kills


def conversation(
    forks: Any, tmp_path: Path, reference: dict[str, Any], rng: Random, *, turns: int, kills: int
) -> Workflow:
    """``turns`` turns of one workflow (one safepoint run), a kill in every other turn until
    ``kills`` landed: right after the first or the second payment, right after the auditor's
    first request was paid (its response lost: re-sent on resume), or at a random instant."""
    run = workflow(forks, tmp_path, "conversation", journal=True)
    span = reference["span"]
    for turn in range(1, turns + 1):
        wanted = min(kills, (turn + 1) // 2)
        finished = False
        while run.kills < wanted and not finished:
            before = run.kills
            kind = KILLS[(turn // 2) % len(KILLS)] if wanted - run.kills == 1 else "payment#1"
            if kind is None and turn == turns:  # the last chance: a kill that always lands
                kind = "payment#1"
            if kind is None:
                run.kill_at_random(turn, rng, span)
            else:  # in a fresh turn this always lands: every turn pays twice and asks 5 times
                run.ended(run.start(turn, kill_at=kind))
            finished = run.kills == before  # the child ended the turn instead
        assert run.finish(turn)["answer"] == reference["answer"]
    assert run.kills == kills
    run.paid_again = check_run(run, reference, turns)
    return run


def kill_again_and_again(
    forks: Any, tmp_path: Path, reference: dict[str, Any], rng: Random, wanted: int
) -> Workflow:
    """Turns of one workflow each killed right after a payment, then its resumes killed at random
    instants, until ``wanted`` kills landed; each turn ends with the uninterrupted run's answer."""
    run = workflow(forks, tmp_path, "again", journal=True)
    span = reference["span"]
    turn = 0
    while run.kills < wanted:
        turn += 1
        run.ended(run.start(turn, kill_at='["'))  # the first payment's key: right after its effect
        for _ in range(rng.randint(1, 2)):
            run.kill_at_random(turn, rng, span)
        assert run.finish(turn)["answer"] == reference["answer"]
    run.paid_again = check_run(run, reference, turn)
    return run


@pytest.mark.crash
def test_a_20_turn_run_killed_10_times_counts_each_response_once(
    forks: Any, tmp_path: Path, reference: dict[str, Any]
) -> None:
    """20 workflow runs of one workflow (one safepoint run), 10 of them killed: 0 effects repeated,
    0 recorded responses paid again, the same answers; the token counters are the recorded
    responses' usage, each once, and the fake model was paid that plus the re-sent calls."""
    run = conversation(forks, tmp_path, reference, Random(SEED), turns=20, kills=10)
    # 3 kills landed right after a paid request: re-sent, paid twice, kept out of the counters.
    assert run.resent() >= 3
    assert run.paid_again["tokens_in"] > 0
    print(f"\nagent framework journal, 20 turns: {run.summary()}")


@pytest.mark.crash
def test_killed_again_while_resuming_nothing_recorded_is_repeated(
    forks: Any, tmp_path: Path, reference: dict[str, Any]
) -> None:
    """5 more kills (15 with the 20-turn run): each turn killed after a payment, then its resumes
    killed at random instants — resumes of resumes repeat nothing either."""
    run = kill_again_and_again(forks, tmp_path, reference, Random(SEED + 1), 5)
    print(f"\nagent framework journal, kills while resuming: {run.summary()}")


# The long run, for make soak only (SAFEPOINT_SOAK=1): defined only then, so that make test
# (CI=true) collects no crash test it would skip.
if os.environ.get("SAFEPOINT_SOAK"):

    @pytest.mark.crash
    def test_soak_killed_with_the_journal_30_times_nothing_recorded_is_repeated(
        forks: Any, tmp_path: Path, reference: dict[str, Any]
    ) -> None:
        """The same at >= 30 kills from a fresh seed."""
        seed = int(os.environ.get("SAFEPOINT_SEED", str(time.time_ns() % 10_000)))
        run = kill_again_and_again(forks, tmp_path, reference, Random(seed), 30)
        print(f"\nagent framework journal soak (seed {seed}): {run.summary()}")


@pytest.mark.crash
def test_two_processes_resuming_one_cut_run_at_once_pay_once(
    forks: Any, tmp_path: Path, reference: dict[str, Any]
) -> None:
    """Killed after a payment, the run is resumed by two processes let go together, both from the
    cut checkpoint: one holds the workflow's run, the other waits, then replays all the first
    recorded — no payment and no request twice, the same answer, each call counted once."""
    run = workflow(forks, tmp_path, "both", journal=True)
    run.ended(run.start(1, kill_at="payment#2"))
    go = run.work / "go"
    first, second = run.start(1, go=str(go)), run.start(1, go=str(go))
    for process in (first, second):
        while not (run.work / f"ready-{process.pid}").exists():
            time.sleep(0.001)
    go.touch()
    run.ended(first)
    run.ended(second)
    assert [r["answer"] for r in run.results] == [reference["answer"]] * 2
    check_run(run, reference, 1)


@pytest.mark.crash
def test_killed_without_the_journal_payments_repeat(forks: Any, tmp_path: Path) -> None:
    """Without the journal, kills right after a payment repeat it on resume (so the test above can fail)."""
    run = workflow(forks, tmp_path, "off", journal=False)
    turn = 0
    while run.kills < 5:
        turn += 1
        run.ended(run.start(turn, kill_at="charge:5"))
        run.finish(turn)
    with pytest.raises(DuplicateEffect):
        run.ledger().check_exactly_once()
    repeated = sum(n - 1 for n in run.ledger().counts(("record",)).values() if n > 1)
    assert repeated >= 5
