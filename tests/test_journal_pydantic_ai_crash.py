"""The Pydantic AI call journal under real SIGKILLs: no effect twice, no recorded response paid again.

The offline shop (``helpers/pai_journal_agent.py``: Pydantic AI's real
``Agent`` on a scripted ``FunctionModel``, a non-idempotent ``charge`` writing
to a ``Ledger`` outside the database and an idempotent ``lookup``, two calls
in parallel per turn) runs a 20-turn conversation in child processes
(``helpers/pai_journal_child.py``) — each turn the app's load, run, save —
that are SIGKILLed right after a charge's effect, right after a model request
was paid (before its answer is recorded) and at random instants, each resumed
by a fresh process doing what the app always does. With the journal:
0 effects repeated, no model request paid twice beyond those the journal
counted as re-sent (in flight at a kill), the same answers and the same
conversation — each message once — as an uninterrupted run, and counters
equal to the usage of the responses the journal recorded, each counted once
(the model's own ledger = the counters + the re-sent requests, shown apart).
The conversation ends with two processes resuming it at once: one holds each
turn, the other waits and replays. With the journal off, five kills right after
a payment show it paid again, so these tests can fail. ``SAFEPOINT_SOAK=1``
(``make soak``) runs ``test_soak_…``: at least 30 kills. Each test prints its
kills and the requests re-sent (``-s`` shows them; also in the JUnit
properties).

Children are forked from a forkserver that imported Pydantic AI once.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing import forkserver
from pathlib import Path
from random import Random
from typing import Any

import pytest

from helpers.pai_journal_agent import answer
from helpers.pai_journal_child import child
from safepoint.crashrig.ledger import DuplicateEffect, Ledger

SEED = 33_2027
TURNS = 20
AT_A_CHARGE = 5  # kills right after a payment's effect, before its result is recorded
AT_A_REQUEST = 3  # kills right after a model request was paid, before its response is recorded
AT_RANDOM = 10
COUNTED = ("tokens_in", "tokens_out", "spend", "model_calls", "tool_calls")
# What the forkserver imports once. Python 3.11's forkserver does not take the parent's sys.path,
# so ``helpers`` may not import there (then each child imports it): the heavy part is named too.
PRELOAD = ["pydantic_ai", "safepoint.adapters.pydantic_ai", "helpers.pai_journal_child"]


@pytest.fixture(scope="module")
def forks() -> Any:
    """The forkserver context, its server having imported ``PRELOAD``. There is one server per
    process, and it imports what was asked when it started: one another test module started
    without these (its own framework's) is stopped here, and the next child of any module starts
    one importing both lists — else every child here would import Pydantic AI again (~2 s)."""
    context = multiprocessing.get_context("forkserver")
    server = forkserver._forkserver  # the one per process (private; stable since 3.4)
    asked = [name for name in getattr(server, "_preload_modules", []) if name != "__main__"]
    if getattr(server, "_forkserver_pid", None) is not None and not set(PRELOAD) <= set(asked):
        server._stop()  # its children ended with their tests
    context.set_forkserver_preload([*asked, *(name for name in PRELOAD if name not in asked)])
    return context


@dataclass
class Scenario:
    """One conversation, killed and resumed in fresh processes until all its turns are saved."""

    forks: Any
    work: Path
    journal: bool
    turns: int = TURNS
    kills: int = 0
    at_random: int = 0
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

    def wait_ready(self, process: Any) -> None:
        ready = self.work / f"ready-{process.pid}"
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.001)

    def kill_after_effect(self, key: str) -> None:
        before = self.kills
        self.ended(self.start(kill_at=key))
        assert self.kills == before + 1, f"no kill at {key}"

    def kill_at_random(self, rng: Random, window: float) -> bool:
        """Kill a fresh process at a random instant up to ``window`` seconds after its first call
        (a kill while it starts up, or replays, would cut nothing). False when the process
        finished first."""
        with self.ledger() as ledger:
            process = self.start()
            self.wait_ready(process)
            while process.is_alive() and not any(e.pid == process.pid for e in ledger.calls()):
                time.sleep(0.001)
        time.sleep(rng.uniform(0.0, window))
        process.kill()
        self.ended(process)
        self.at_random += process.exitcode == -9
        return process.exitcode == -9

    def fresh_turn(self) -> int:
        """The first turn no process has started yet (every effect of it still to come)."""
        with self.ledger() as ledger:
            turns = [int(e.key[1:].split(":")[0]) for e in ledger.calls() if e.kind == "model"]
        return max(turns, default=-1) + 1

    def finish_with_two(self) -> None:
        """Two processes resume the conversation at once: each turn, one holds it and the other
        waits, then replays what the first recorded (both end with the whole conversation)."""
        go = self.work / "go"
        both = [self.start(go=str(go)), self.start(go=str(go))]
        for process in both:
            self.wait_ready(process)
        go.touch()
        for process in both:
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
    assert clean.ledger().check_usage(result["counters"]) == {"tokens_in": 0, "tokens_out": 0}
    return result


def check_clean(run: Scenario, reference: dict[str, Any]) -> tuple[int, int]:
    """What every journaled conversation must end with; the requests re-sent and paid again."""
    for final in run.results[-2:]:  # the two processes that finished it
        assert final["answers"] == reference["answers"]
        assert final["messages"] == reference["messages"]  # each message once, as uninterrupted
    counters = run.results[-1]["counters"]
    assert {k: counters[k] for k in COUNTED} == {k: reference["counters"][k] for k in COUNTED}
    # the run's tokens are the recorded responses' usage, each counted once
    assert [counters["tokens_in"], counters["tokens_out"]] == run.results[-1]["recorded_tokens"]
    ledger = run.ledger()
    effects, paid = ledger.check_calls(resent=counters["resent_calls"])  # DuplicateEffect if repeated
    assert effects == 3 * TURNS
    repeated = ledger.repeated_model_calls()
    assert paid == 3 * TURNS + repeated
    # the model's ledger = the counters + the re-sent requests, which the run shows apart
    ledger.check_usage(counters)
    return counters["resent_calls"], repeated


def kills_with_the_journal(
    forks: Any, tmp_path: Path, reference: dict[str, Any], rng: Random, wanted: int
) -> dict[str, int]:
    """Kill 20-turn conversations with the journal on until ``wanted`` kills landed, in a shuffled
    order: five right after a charge's effect and three right after a paid model request (each
    in a turn no process has started yet), ten at random instants (within about two turns of a
    process's first call); each conversation is finished by two processes at once. The kills,
    the requests re-sent and those paid again."""
    window = 2 * reference["elapsed"] / TURNS
    seen = {"kills": 0, "at_random": 0, "resent": 0, "paid_again": 0, "conversations": 0}
    while seen["kills"] < wanted:
        run = scenario(forks, tmp_path, f"on-{seen['conversations']}", journal=True)
        kinds = ["charge"] * AT_A_CHARGE + ["request"] * AT_A_REQUEST + ["random"] * AT_RANDOM
        rng.shuffle(kinds)
        for kind in kinds[: wanted - seen["kills"]]:
            turn = run.fresh_turn()
            if turn >= TURNS - 1:  # a turn kept for the two processes that finish it
                break
            if kind == "charge":  # the payment made, its result not recorded
                run.kill_after_effect(f"charge:{10 * turn + rng.choice((1, 2))}")
            elif kind == "request":  # the provider paid, its answer not recorded
                run.kill_after_effect(f"t{turn}:s{rng.randrange(3)}")
            elif not run.kill_at_random(rng, window):
                break
        run.finish_with_two()
        resent, repeated = check_clean(run, reference)
        seen["kills"] += run.kills
        seen["at_random"] += run.at_random
        seen["resent"] += resent
        seen["paid_again"] += repeated
        seen["conversations"] += 1
    return seen


def report(record_property: Any, name: str, seen: dict[str, int]) -> None:
    for key, value in seen.items():
        record_property(key, value)
    print(f"\n{name}: " + ", ".join(f"{key} {value}" for key, value in seen.items()))


@pytest.mark.crash
def test_killed_with_the_journal_nothing_recorded_is_repeated(
    forks: Any, tmp_path: Path, reference: dict[str, Any], record_property: Any
) -> None:
    """A 20-turn conversation killed 18 times (right after five payments, right after three paid
    requests, ten times at random instants; shuffled), resumed in fresh processes: no payment
    twice, no recorded response paid again (only requests the kills cut, re-sent and counted
    apart), the same answers and history, counters from the recorded responses each counted once."""
    seen = kills_with_the_journal(forks, tmp_path, reference, Random(SEED), 18)
    report(record_property, "journal on", seen)
    assert seen["kills"] >= 18
    # Each kill right after a paid request leaves that request in flight; a later kill can land
    # before its re-send, so at least one re-send is seen, not one per such kill.
    assert seen["resent"] >= 1


# The long run, for make soak only (SAFEPOINT_SOAK=1): defined only then, so that make test
# (CI=true) collects no crash test it would skip.
if os.environ.get("SAFEPOINT_SOAK"):

    @pytest.mark.crash
    def test_soak_killed_with_the_journal_30_times_nothing_recorded_is_repeated(
        forks: Any, tmp_path: Path, reference: dict[str, Any], record_property: Any
    ) -> None:
        """The same with at least 30 kills, from a fresh seed each run."""
        seed = time.time_ns()
        seen = kills_with_the_journal(forks, tmp_path, reference, Random(seed), 30)
        report(record_property, f"soak (seed {seed})", seen)
        assert seen["kills"] >= 30


@pytest.mark.crash
def test_killed_without_the_journal_payments_repeat(forks: Any, tmp_path: Path, record_property: Any) -> None:
    """The same shop without the journal, killed five times right after a turn's second payment:
    each process runs the cut turn again from its start and pays again (what the journal is
    for — and the proof the checks above can fail)."""
    run = scenario(forks, tmp_path, "off", journal=False)
    run.turns = 1
    for _ in range(5):
        run.kill_after_effect("charge:2")
    assert run.kills == 5
    ledger = run.ledger()
    repeated = {key: n - 1 for key, n in ledger.counts(("record",)).items()}
    assert repeated == {"charge:1": 4, "charge:2": 4}
    with pytest.raises(DuplicateEffect):
        ledger.check_calls()
    seen = {"kills": run.kills, "payments_repeated": sum(repeated.values())}
    seen["paid_again"] = ledger.repeated_model_calls()
    assert seen["paid_again"] == 8  # both requests before the second charge, in each rerun
    report(record_property, "journal off", seen)


@pytest.fixture(autouse=True)
def _no_leftover_children() -> Iterator[None]:
    yield
    for process in multiprocessing.active_children():
        process.kill()
