"""``Run`` on the call journal under real SIGKILLs: nothing recorded is done twice.

The agent (``tests/helpers/run_journal_agent.py``) answers three questions,
its scripted model asking for six tool calls a turn — a non-idempotent
``send`` (``Ledger.record``) and an idempotent ``lookup`` (``Ledger.once``) —
through ``run.call`` and ``run.action``. Children are SIGKILLed right after a
side effect or a paid model request (``--pause-after-effect``), right after a
result was recorded (before the save that covers it) and at random instants,
and resumed in fresh processes. After every kill no effect has
happened twice; at the end the run has the uninterrupted run's answers,
messages, state and counters (the ``lost_*`` ones apart), every checkpoint
verifies, and no model request was paid again once its response was recorded
— the only repeats are requests in flight at a kill (``Ledger.check_calls``) —
and no reconcile hook was asked about an action whose result was recorded.
The same agent with the journal off (its model and tools called directly)
must show repeats under the same kills: the checks can fail.

``SAFEPOINT_CRASH_SEED=<seed>`` replays a run; ``SAFEPOINT_SOAK=1`` (``make soak``)
adds the long run.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

import safepoint
from helpers.run_journal_agent import run as run_agent
from safepoint.crashrig.child import EntrySpec
from safepoint.harness.journaled import LOST_COUNTERS
from safepoint.testing.crash import AgentProcess, DuplicateEffect, Ledger, Outcome

pytestmark = pytest.mark.crash

ENTRY = "helpers.run_journal_agent:run"
RUN_ID = "ticket"
BASE_SEED = int(os.environ.get("SAFEPOINT_CRASH_SEED") or time.time_ns() % 1_000_000_007)
COMPARED = ("status", "messages", "state", "cursors")
MODES = ("effect", "record", "response", "clock")


@dataclass
class Scenario:
    """One run of the agent in its own store and ledger, killed and resumed in child processes."""

    where: Path
    journal: bool = True
    pids: list[int] = field(default_factory=list)  # the children, in the order they ran
    # A model response's digest or an action's key -> the child that reported it recorded first.
    recorded: dict[str, int] = field(default_factory=dict)
    hooks: list[tuple[str, int]] = field(default_factory=list)  # (action key, child) per hook asked
    kills: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.where.mkdir(parents=True)
        kwargs = json.dumps({"journal": self.journal})
        self.spec = EntrySpec(
            ENTRY, f"sqlite:///{self.where / 'state.db'}", self.where / "ledger.db", RUN_ID, None, kwargs
        )

    def child(self, *extra: str, **kwargs: Any) -> AgentProcess:
        index = len(self.pids)

        def on_line(line: str) -> None:
            word, _, rest = line.partition(" ")
            if word == "journal":
                self.recorded.setdefault(rest, index)
            elif word == "hook":
                self.hooks.append((rest, index))

        spec = replace(self.spec, kwargs=json.dumps({"journal": self.journal, **kwargs}))
        process = AgentProcess(spec, *extra, on_line=on_line)
        self.pids.append(process.proc.pid)
        return process

    def head(self) -> int:
        with safepoint.open_store(self.spec.store_url) as store:
            try:
                return store.load(RUN_ID).step
            except safepoint.NotFound:
                return -1

    def kill(self, rng: random.Random, last: int) -> Outcome:
        """SIGKILL a child right after one of its first side effects or paid model requests
        (``effect``), right after it recorded one of its first results (``record``) or model
        responses (``response``), before the save that covers it, or at a random instant after
        one of its first saves (``clock``); a guard at the run's last step keeps a late kill
        inside the run."""
        guard, mode = ("--pause-after", str(last)), rng.choice(MODES)
        if mode == "effect":
            child = self.child("--pause-after-effect", str(rng.randint(1, 6)), *guard)
            child.wait_for("paused")
        elif mode == "record":
            child = self.child(*guard, pause_after_record=rng.randint(1, 6))
            child.wait_for("paused")
        elif mode == "response":
            child = self.child(*guard, pause_after_response=rng.randint(1, 2))
            child.wait_for("paused")
        else:
            child = self.child(*guard)
            saves = rng.randint(0, 4)
            if saves == 0 or child.wait_for("saved", saves):
                time.sleep(rng.uniform(0, 0.04))
        outcome = child.kill()
        assert outcome.killed, f"the child (pid {outcome.pid}) exited before it was killed"
        self.kills[mode] += 1
        return outcome

    def finish(self) -> Any:
        outcome = self.child().wait()
        assert outcome.result is not None
        return json.loads(outcome.result)

    def hooks_after_records(self) -> list[str]:
        """Actions whose reconcile hook a child asked although an earlier child had recorded
        their result (the hook is for an action with no recorded result only)."""
        return [key for key, child in self.hooks if self.recorded.get(key, child) < child]

    def in_flight(self, ledger: Ledger) -> int:
        """The model requests paid again that were in flight at a kill (no child had reported
        their response recorded before the one that paid again); a request paid again after
        that is left for ``check_calls`` to report."""
        order = {pid: index for index, pid in enumerate(self.pids)}
        allowed, seen = 0, Counter[str]()
        for effect in ledger.calls():
            if effect.kind != "model":
                continue
            seen[effect.key] += 1
            recorded_by = self.recorded.get(effect.key)
            if seen[effect.key] > 1 and (recorded_by is None or recorded_by >= order[effect.pid]):
                allowed += 1
        return allowed


@dataclass(frozen=True)
class Ending:
    """What a finished run must share with the uninterrupted one."""

    result: Any
    fields: dict[str, Any]
    counters: dict[str, Any]
    effects: dict[str, Any]
    last: int


def ending(scenario: Scenario, result: Any) -> Ending:
    """The finished run as the store and the ledger hold it; every checkpoint loaded and verified."""
    with safepoint.open_store(scenario.spec.store_url) as store:
        history = [info.step for info in store.history(RUN_ID)]
        assert history == list(range(len(history)))
        final = [store.load(RUN_ID, step) for step in history][-1]
    data = final.to_dict()
    with Ledger(scenario.spec.ledger) as ledger:
        effects = ledger.effects()
    counters = {k: v for k, v in final.counters.items() if k not in LOST_COUNTERS}
    return Ending(result, {k: data[k] for k in COMPARED}, counters, effects, final.step)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Ending:
    """The uninterrupted run (in this process: a child would only take longer)."""
    scenario = Scenario(tmp_path_factory.mktemp("reference") / "run")
    with safepoint.open_store(scenario.spec.store_url) as store, Ledger(scenario.spec.ledger) as ledger:
        result = run_agent(store, RUN_ID, ledger)
    return ending(scenario, json.loads(json.dumps(result)))


def crashed(where: Path, reference: Ending, kills: int, seed: int) -> dict[str, int]:
    """One run killed ``kills`` times and finished: checked as the module docstring says."""
    rng, scenario = random.Random(seed), Scenario(where)
    head = -1
    for number in range(kills):
        if head >= reference.last:
            break
        outcome = scenario.kill(rng, reference.last)
        new = scenario.head()
        assert new >= max(head, *outcome.saved, -1), f"kill {number}: the head went back (seed {seed})"
        head = new
        with Ledger(scenario.spec.ledger) as ledger:
            ledger.check_exactly_once()  # DuplicateEffect names the key: never acceptable
    result = scenario.finish()
    end = ending(scenario, result)
    assert end.result["answers"] == reference.result["answers"], f"seed {seed}"
    assert end.fields == reference.fields, f"seed {seed}"
    assert end.counters == reference.counters, f"seed {seed}"
    assert end.effects == reference.effects, f"seed {seed}"
    with Ledger(scenario.spec.ledger) as ledger:
        in_flight = scenario.in_flight(ledger)
        effects, paid = ledger.check_calls(resent=in_flight)
    assert scenario.hooks_after_records() == [], f"seed {seed}"
    with safepoint.open_store(scenario.spec.store_url) as store:
        lost = int(store.load(RUN_ID).counters.get("lost_calls", 0))  # intents found: sent at most once
    assert max(lost, in_flight) <= sum(scenario.kills.values())  # one call in flight per kill at most
    return {
        **scenario.kills,
        "in_flight": in_flight,
        "lost_calls": lost,
        "hooks": len(scenario.hooks),
        "paid": paid,
        "effects": effects,
    }


def run_kills(tmp_path: Path, reference: Ending, kills: int, per_run: int) -> Counter[str]:
    """Runs of up to ``per_run`` kills each until ``kills`` kills landed (a run may end before its
    last kills: the next run takes them)."""
    totals: Counter[str] = Counter()
    started = time.monotonic()
    number = 0
    while (landed := sum(totals[mode] for mode in MODES)) < kills:
        seed = BASE_SEED + number
        totals.update(crashed(tmp_path / f"run-{number}", reference, min(per_run, kills - landed), seed))
        number += 1
    print(f"\nRun journal crash test (seed {BASE_SEED}): {dict(totals)}, {time.monotonic() - started:.1f} s")
    return totals


def test_run_on_the_journal_repeats_nothing_recorded_across_15_kills(
    tmp_path: Path, reference: Ending
) -> None:
    """15 SIGKILLs (after effects and at random instants), each resumed fresh: no effect twice, no
    recorded model response requested again, the uninterrupted run's answers and counters."""
    totals = run_kills(tmp_path, reference, kills=15, per_run=5)
    assert sum(totals[mode] for mode in MODES) == 15


# The long run, for make soak only (SAFEPOINT_SOAK=1): defined only then, so that make test
# (CI=true) collects no crash test it would skip.
if os.environ.get("SAFEPOINT_SOAK"):

    def test_soak_run_on_the_journal_repeats_nothing_recorded_across_40_kills(
        tmp_path: Path, reference: Ending
    ) -> None:
        """The same as the 15-kill test, 40 kills (make soak)."""
        totals = run_kills(tmp_path, reference, kills=40, per_run=8)
        assert sum(totals[mode] for mode in MODES) == 40


def test_the_same_agent_without_the_journal_repeats_effects_and_paid_calls(tmp_path: Path) -> None:
    """Journal off (model and tools called directly), 5 kills right after an effect: every kill
    makes something happen twice, and the checks above say so."""
    rng, scenario = random.Random(BASE_SEED), Scenario(tmp_path / "off", journal=False)
    for _ in range(5):
        child = scenario.child("--pause-after-effect", str(rng.randint(1, 6)))
        assert child.wait_for("paused"), "the run ended before the kill"
        assert child.kill().killed
    scenario.finish()
    with Ledger(scenario.spec.ledger) as ledger:
        paid_again = ledger.repeated_model_calls()
        effects_again = sum(n - 1 for n in ledger.counts().values())
        with pytest.raises(DuplicateEffect):
            ledger.check_calls(resent=scenario.in_flight(ledger))
    print(
        f"\nRun with the journal off (seed {BASE_SEED}): 5 kills, {effects_again} tool effects "
        f"repeated, {paid_again} model requests paid again"
    )
    assert paid_again + effects_again >= 5
