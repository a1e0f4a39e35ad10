"""The LangGraph call journal under real SIGKILLs: no effect twice, no recorded response paid again.

A realistic offline agent (``helpers/langgraph_journal_app.py``: a real
``StateGraph``, a scripted chat model making several tool calls per turn,
a non-idempotent ``charge`` writing to a ``Ledger`` outside the database and
an idempotent ``lookup``) runs a two-turn conversation in child processes
that are SIGKILLed right after ``charge``'s effect and at random instants,
each resumed by a fresh process (forked from a forkserver that imported
LangGraph once: ``helpers/langgraph_journal_child.py``). With the journal:
0 effects repeated, no model request paid twice beyond the ones the
journal counts as re-sent (in flight at a kill), the same final answer and
the same counters as an uninterrupted run — under LangGraph's default
durability and under ``durability="sync"``. With the journal off the same
kills repeat effects (so these tests can fail). ``SAFEPOINT_SOAK=1`` (``make
soak``) runs the larger variant: at least 30 kills with the journal on.
"""

from __future__ import annotations

import os
from pathlib import Path
from random import Random
from typing import Any

import pytest

from helpers.langgraph_journal_child import Episode, forkserver

SOAK = os.environ.get("SAFEPOINT_SOAK") == "1"
SEED = 32_2026
MODES = ("invoke", "ainvoke", "stream", "astream")
CACHES = ("none", "global", "true", "false", "instance")
COUNTERS = ("called", "tokens_in", "tokens_out", "spend")


@pytest.fixture(scope="module")
def forks() -> Any:
    return forkserver()


REFERENCES: dict[str, dict[str, Any]] = {}  # an uninterrupted run's result, by durability and length


def reference(forks: Any, root: Path, durability: str, turns: int = 2) -> dict[str, Any]:
    """An uninterrupted run's result (once per durability and length in a session)."""
    name = f"reference-{durability}-{turns}"
    if name in REFERENCES:
        return REFERENCES[name]
    run = Episode.start(forks, root, name, durability=durability, journal=True, turns=turns)
    found = run.finish()
    with run.ledger() as ledger:
        assert ledger.repeated_model_calls() == 0
        assert ledger.check_exactly_once() == 3 * turns  # a charge and 2 distinct lookups a turn
    check_usage(run, found)
    assert found["stored"]["model_calls"] == 3 * turns
    assert found["stored"]["resent_calls"] == 0
    REFERENCES[name] = found
    return found


def check_clean(run: Episode, ref: dict[str, Any]) -> None:
    """0 effects repeated, no recorded response paid again, same answer and counters."""
    result = run.result
    with run.ledger() as ledger:
        ledger.check_calls(resent=result["resent"])  # DuplicateEffect names what repeated
    assert result["answer"] == ref["answer"], run
    assert {k: result[k] for k in COUNTERS} == {k: ref[k] for k in COUNTERS}, (run, result)
    check_usage(run, ref)


def check_usage(run: Episode, ref: dict[str, Any]) -> None:
    """The thread run's counters (what ``safepoint runs`` shows) count each recorded response
    once, as the uninterrupted run's do; the provider was paid those plus the re-sent calls'
    usage, which the counters keep apart."""
    stored, expected = run.result["stored"], ref["stored"]
    for name in ("tokens_in", "tokens_out", "spend", "model_calls", "tool_calls"):
        assert stored[name] == expected[name], (run, name, stored, expected)
    assert stored["tokens_in"] == run.result["tokens_in"]  # the entries' sum, once each
    assert stored["resent_calls"] == run.result["resent"]
    with run.ledger() as ledger:
        ledger.check_usage(stored)  # paid = the counters + the requests in flight at kills


def journal_on(forks: Any, root: Path, durability: str, charge_episodes: int, random_kills: int) -> int:
    """Kills with the journal on: right after effects, then at random instants; every episode
    checked clean. Returns the kills that landed."""
    rng = Random(f"{SEED}-{durability}")
    ref = reference(forks, root, durability)
    kills, n = 0, 0
    for _ in range(charge_episodes):  # killed right after turn 1's charge, then turn 2's
        n += 1
        run = Episode.start(
            forks,
            root,
            f"charge{n}",
            durability=durability,
            journal=True,
            mode=rng.choice(MODES),
            cache=rng.choice(CACHES),
        )
        assert run.kill_after_charge()
        assert run.kill_after_charge()
        run.finish()
        check_clean(run, ref)
        assert run.result["reconciled"] >= 1  # turn 2's charge was found in flight by the last process
        kills += run.killed
    horizon = ref["elapsed"] * 1.3
    landed = 0
    while landed < random_kills:
        n += 1
        run = Episode.start(
            forks,
            root,
            f"random{n}",
            durability=durability,
            journal=True,
            mode=rng.choice(MODES),
            cache=rng.choice(CACHES),
        )
        for _ in range(4):
            if landed >= random_kills or not run.kill_at(rng.uniform(0, horizon)):
                break
            landed += 1
        run.finish()
        check_clean(run, ref)
        kills += run.killed
    return kills


@pytest.mark.crash
@pytest.mark.parametrize("durability", ["default", "sync"])
def test_killed_with_the_journal_nothing_repeats(forks: Any, tmp_path: Path, durability: str) -> None:
    """SIGKILLed right after the non-idempotent tool's effect and at random instants, resumed in
    fresh processes: 0 effects repeated, 0 recorded responses paid again, same answer and counters."""
    # make test: 4 kills per durability (one episode of 2 kills right after the charge, 2 at random
    # instants) beside the 10 of the long conversation below, 18 in all; make soak: 38 per
    # durability (8 after the charge, 30 at random).
    charge_episodes, random_kills = (4, 30) if SOAK else (1, 2)
    kills = journal_on(forks, tmp_path, durability, charge_episodes, random_kills)
    assert kills >= 2 * charge_episodes + random_kills


@pytest.mark.crash
def test_a_long_conversation_killed_ten_times_counts_each_response_once(forks: Any, tmp_path: Path) -> None:
    """20 turns, SIGKILLed 10 times at random instants (each resumed in a fresh process): nothing
    repeated, and the thread's counters — what ``safepoint runs`` shows — count each recorded
    response once; the provider was paid those plus the requests in flight at the kills."""
    ref = reference(forks, tmp_path, "default", turns=20)
    rng = Random(f"{SEED}-long")
    run = Episode.start(forks, tmp_path, "long", durability="default", journal=True, turns=20)
    landed = attempts = 0
    while landed < 10:  # short delays: each process gets a little further before its kill
        attempts += 1
        assert attempts < 40, "the kills stopped landing: the conversation ended first"
        landed += run.kill_at(rng.uniform(0, ref["elapsed"] / 12))
    run.finish()
    check_clean(run, ref)  # check_usage included: the counters against the ledger's payments


@pytest.mark.crash
def test_killed_without_the_journal_effects_repeat(forks: Any, tmp_path: Path) -> None:
    """The same kills with the journal off repeat the charge: the clean runs above can fail."""
    repeated_effects = kills = 0
    for durability in ("default", "sync"):
        run = Episode.start(forks, tmp_path, f"off-{durability}", durability=durability, journal=False)
        for _ in range(2 if durability == "default" else 3):
            assert run.kill_after_charge()
        run.finish()
        kills += run.killed
        with run.ledger() as ledger:
            repeated_effects += sum(n - 1 for n in ledger.counts(("record",)).values())
    assert kills == 5
    assert repeated_effects >= 2  # each kill right after the charge repeats it on resume


@pytest.mark.crash
def test_two_processes_resuming_one_thread_at_once_repeat_nothing(forks: Any, tmp_path: Path) -> None:
    """Killed right after the charge, the thread is resumed by two processes started together:
    one holds the thread for the turn, the other waits, then finds the turn done."""
    ref = reference(forks, tmp_path, "sync")
    run = Episode.start(forks, tmp_path, "pair", durability="sync", journal=True, turns=2, delay=0.02)
    assert run.kill_after_charge()
    go = run.folder / "go"
    pair = [run._child(resume_only=True, go=str(go)) for _ in range(2)]
    for child in pair:
        child.wait_for("ready")
    go.touch()
    assert [child.end() for child in pair] == [0, 0]
    with run.ledger() as ledger:  # one of the two ran the rest of the turn; the other found it done
        assert len({call.pid for call in ledger.calls()} & {child.pid for child in pair}) == 1
    run.finish()
    check_clean(run, ref)
