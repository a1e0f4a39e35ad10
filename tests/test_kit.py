"""The crash-test kit, with real child processes and real SIGKILLs.

* the demo agent killed at every step boundary of a 20-step run, and at 100 random instants;
* a non-idempotent action pending at the crash is not rerun; an idempotent one is, with the
  same key, and takes effect once;
* budgets hold across 5 consecutive crash/resume cycles;
* human input given by another process, after the asking process exited;
* the copyable example in examples/ runs.

Randomness comes from one seed, printed by each test; ``SAFEPOINT_CRASH_SEED=<seed>`` replays it.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import safepoint
from safepoint import Checkpoint, Status, Store
from safepoint.demo.agent import run_demo_agent
from safepoint.harness import Budget, Reconcile, Run
from safepoint.testing.crash import (
    CrashCheckFailed,
    CrashKit,
    DuplicateEffect,
    EntrySpec,
    Ledger,
    kill_after_effect,
    kill_at_boundary,
    resume,
)

pytestmark = pytest.mark.crash

SEED = int(os.environ.get("SAFEPOINT_CRASH_SEED") or time.time_ns() % 1_000_000_007)
DEMO = "safepoint.demo.agent:run_demo_agent"
DEMO_OPTIONS = "safepoint.demo.agent:store_options"
TWENTY_STEPS = {"documents": 6}  # 6 documents, 2 enriched: checkpoints 0..19
TOKEN_LIMIT = 1500


# -- agents the child processes run (importable: ``test_kit:<name>``) ----------------


def effects_agent(store: Store, run_id: str, ledger: Ledger) -> Any:
    """Notifies (not idempotent, no hook), then charges (idempotent: rerun), then finishes."""
    run = Run.open(store, run_id, reconcile={"charge": Reconcile.rerun()})
    while run.active:
        if run.steps == 0:
            run.append({"role": "tool", "content": run.action("notify", {}, lambda key: notify(ledger, key))})
            run.commit()
        elif run.steps == 1:
            receipt = run.action("charge", {"amount": 5}, lambda key: ledger.once(key, lambda: "receipt-1"))
            run.append({"role": "tool", "content": receipt})
            run.commit()
        else:
            run.finish()
    return {"status": run.status.value}


def notify(ledger: Ledger, key: str) -> str:
    ledger.record(key, "paged the on-call engineer")
    return "notified"


def tight_budget_agent(store: Store, run_id: str, ledger: Ledger) -> Any:
    """The demo agent with too few tokens for its batch: it must stop, failed, at the limit."""
    return run_demo_agent(store, run_id, ledger, budget=Budget(tokens=TOKEN_LIMIT))


def careless_agent(store: Store, run_id: str, ledger: Ledger) -> Any:
    """Calls the model again when it resumes a step whose action was pending: pays twice."""
    run = Run.open(store, run_id, cursors={"i": 0}, reconcile={"send": Reconcile.rerun()})
    while run.active:
        if run.cursors["i"] == 3:
            run.finish()
            break
        run.add_usage(tokens_in=100, tokens_out=10)  # should be skipped when run.pending is set
        run.action("send", {}, lambda key: ledger.once(key, lambda: "sent"))
        run.advance("i")
        run.commit()
    return {"status": run.status.value}


def asking_agent(store: Store, run_id: str, ledger: Ledger) -> Any:
    """Asks a human, stops waiting; when resumed with the answer, records it and finishes."""
    run = Run.open(store, run_id)
    while run.active:
        if run.has_input:
            answer = run.take_input()
            run.append({"role": "user", "content": answer})
            ledger.record(f"{run_id}:answer", answer)
            run.finish()
        else:
            run.append({"role": "assistant", "content": "Which format?"})
            run.wait_for_input("Which format?")
    return {"status": run.status.value, "question": run.question}


# -- helpers -------------------------------------------------------------------------


def spec_for(tmp_path: Path, entry: str) -> EntrySpec:
    return EntrySpec(f"test_kit:{entry}", f"sqlite:///{tmp_path / 'state.db'}", tmp_path / "ledger.db")


def answer_from_another_process(spec: EntrySpec, answer: str) -> int:
    """``Run.resume_with`` in a fresh interpreter; returns its pid."""
    code = textwrap.dedent(f"""
        import os, safepoint
        from safepoint.harness import Reconcile, Run
        with safepoint.open_store({spec.store_url!r}) as store:
            Run.resume_with(store, {spec.run_id!r}, {answer})
        print(os.getpid())
    """)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return int(done.stdout)


def head(spec: EntrySpec) -> Checkpoint:
    with safepoint.open_store(spec.store_url) as store:
        return store.load(spec.run_id)


def ledger_calls(spec: EntrySpec) -> list[tuple[str, str, bool]]:
    with Ledger(spec.ledger) as ledger:
        return [(call.key, call.kind, call.applied) for call in ledger.calls()]


# -- the demo agent under the kit ---------------------------------------------------------


def test_demo_agent_killed_at_every_step_boundary(tmp_path: Path) -> None:
    """Killed right after each of its 20 saves in turn, the run ends as if never killed."""
    kit = CrashKit(DEMO, tmp_path, store_options=DEMO_OPTIONS, kwargs=TWENTY_STEPS, seed=SEED)
    assert kit.reference().snapshot["step"] == 19
    report = kit.boundaries()
    print(f"\nSAFEPOINT_CRASH_SEED={SEED}: {report}")
    assert report.kills["boundary"] == 20
    assert report.resumes == 1


def test_demo_agent_killed_at_100_random_instants(tmp_path: Path) -> None:
    """100 kills inside saves, after side effects and at clock instants lose and repeat nothing."""
    kit = CrashKit(DEMO, tmp_path, store_options=DEMO_OPTIONS, kwargs=TWENTY_STEPS, seed=SEED)
    report = kit.at_random(100, per_run=10)
    print(f"\nSAFEPOINT_CRASH_SEED={SEED}: {report}")
    assert sum(report.kills.values()) == 100
    assert report.kills["statement"] > 0
    assert report.kills["effect"] > 0
    assert report.kills["clock"] > 0
    assert report.resumes == 10


# -- pending actions at the crash -----------------------------------------------------------


@pytest.mark.parametrize("effect_happened", [False, True])
def test_a_non_idempotent_action_pending_at_the_crash_is_not_rerun(
    tmp_path: Path, effect_happened: bool
) -> None:
    """Killed with ``notify`` pending, the resumed run waits instead of notifying again; a
    human settles it from another process, and the notification happens exactly once."""
    spec = spec_for(tmp_path, "effects_agent")
    # Step 1 is notify's pending save: kill there (before the effect) or right after the effect.
    killed = kill_after_effect(spec, 1, guard=5) if effect_happened else kill_at_boundary(spec, 1)
    assert killed.killed
    assert head(spec).pending_action is not None
    assert len(ledger_calls(spec)) == int(effect_happened)
    resumed = resume(spec)
    assert resumed.returncode == 0
    waiting = head(spec)
    assert waiting.status is Status.WAITING
    assert "notify" in str(waiting.pending_action)
    assert len(ledger_calls(spec)) == int(effect_happened)  # not rerun
    decision = "Reconcile.skip('notified')" if effect_happened else "Reconcile.rerun()"
    assert answer_from_another_process(spec, decision) not in (killed.pid, resumed.pid)
    assert resume(spec).returncode == 0
    assert head(spec).status is Status.DONE
    calls = ledger_calls(spec)
    notify_key = calls[0][0]
    assert [call for call in calls if call[0] == notify_key] == [(notify_key, "record", True)]
    assert head(spec).messages[0] == {"role": "tool", "content": "notified"}


@pytest.mark.parametrize("effect_happened", [False, True])
def test_an_idempotent_action_pending_at_the_crash_is_rerun_with_its_key(
    tmp_path: Path, effect_happened: bool
) -> None:
    """Killed with ``charge`` pending, the resumed run charges again with the same key; the
    service absorbs the repeat, so the charge takes effect once."""
    spec = spec_for(tmp_path, "effects_agent")
    # Step 3 is charge's pending save; effect 2 is the charge (effect 1 the notification).
    killed = kill_after_effect(spec, 2, guard=5) if effect_happened else kill_at_boundary(spec, 3)
    assert killed.killed
    pending = head(spec).pending_action
    assert pending is not None
    assert pending["tool"] == "charge"
    assert resume(spec).returncode == 0
    final = head(spec)
    assert final.status is Status.DONE
    charges = [call for call in ledger_calls(spec) if call[1] == "once"]
    assert {key for key, _, _ in charges} == {pending["key"]}
    assert [applied for _, _, applied in charges] == ([True, False] if effect_happened else [True])
    assert final.messages[-1] == {"role": "tool", "content": "receipt-1"}


# -- budgets ----------------------------------------------------------------------------------


def test_budgets_hold_across_5_crash_resume_cycles(tmp_path: Path) -> None:
    """Killed 5 times and resumed, the run stops at its token limit exactly where an
    uninterrupted run does: no resumed process starts its count from zero."""
    biggest_call = 300  # the demo agent never uses more in one call before its report

    def within_budget(cp: Checkpoint) -> None:
        used = int(cp.counters["tokens_in"]) + int(cp.counters["tokens_out"])
        assert cp.counters["budget_tokens"] == TOKEN_LIMIT
        assert used <= TOKEN_LIMIT or (cp.status is Status.FAILED and used <= TOKEN_LIMIT + biggest_call)

    kit = CrashKit(
        "test_kit:tight_budget_agent", tmp_path, store_options=DEMO_OPTIONS, seed=SEED, check=within_budget
    )
    reference = kit.reference()
    assert reference.snapshot["status"] == "failed"
    assert reference.result == {"status": "failed", "answer": None}
    report = kit.at_random(5, per_run=5)
    print(f"\nSAFEPOINT_CRASH_SEED={SEED}: {report}")
    assert sum(report.kills.values()) == 5


# -- human input ------------------------------------------------------------------------------


def test_human_input_from_another_process_after_the_asker_exited(tmp_path: Path) -> None:
    """One process asks and exits; a second answers; a third continues with the answer."""
    spec = spec_for(tmp_path, "asking_agent")
    asker = resume(spec)
    assert asker.returncode == 0
    assert asker.result == '{"question": "Which format?", "status": "waiting"}'
    assert head(spec).status is Status.WAITING
    answerer = answer_from_another_process(spec, "'pdf'")
    continuer = resume(spec)
    assert len({asker.pid, answerer, continuer.pid}) == 3
    assert continuer.result == '{"question": null, "status": "done"}'
    final = head(spec)
    assert final.status is Status.DONE
    assert final.messages[-1] == {"role": "user", "content": "pdf"}
    assert [(key, applied) for key, _, applied in ledger_calls(spec)] == [("crash-test:answer", True)]


# -- the kit finds mistakes -----------------------------------------------------------------


def test_the_kit_catches_an_agent_that_pays_twice_for_a_resumed_step(tmp_path: Path) -> None:
    """An agent that redoes its model call on resume ends with other counters: the kit says so."""
    kit = CrashKit("test_kit:careless_agent", tmp_path, seed=SEED)
    with pytest.raises(CrashCheckFailed, match="final counters differ"):
        kit.boundaries([1])  # step 1: the first action's pending save


def test_the_kit_names_a_tool_that_needs_a_reconcile_hook(tmp_path: Path) -> None:
    """A run left waiting on an interrupted action without a hook is reported as such."""
    kit = CrashKit("test_kit:effects_agent", tmp_path, seed=SEED)
    with pytest.raises(CrashCheckFailed, match="'notify'; give that tool a reconcile hook"):
        kit.boundaries([1])  # step 1: notify's pending save


def test_the_ledger_counts_effects_by_key(tmp_path: Path) -> None:
    """``record`` repeats are duplicates; ``once`` repeats are absorbed and return the first value."""
    with Ledger(tmp_path / "l.db") as ledger:
        assert ledger.once("k1", lambda: {"id": 1}) == {"id": 1}
        assert ledger.once("k1", lambda: {"id": 2}) == {"id": 1}
        ledger.record("k2", "mail")
        assert ledger.happened("k2")
        assert not ledger.happened("k3")
        assert ledger.lookup("k1") == {"id": 1}
        assert ledger.check_exactly_once() == 2
        ledger.record("k2", "mail again")
        assert ledger.counts() == {"k1": 1, "k2": 2}
        with pytest.raises(DuplicateEffect, match="1 side effect"):
            ledger.check_exactly_once()


def test_the_ledger_counts_paid_model_requests_apart_from_effects(tmp_path: Path) -> None:
    """``model`` notes a paid request; ``check_calls`` fails on a request paid twice beyond the
    ones a journal reports in flight, and on an effect twice, naming keys, never values."""
    with Ledger(tmp_path / "l.db") as ledger:
        ledger.model("turn-1/model#0", {"prompt": "hi"})
        ledger.model("turn-1/model#1")
        ledger.record("pay-1", {"cents": 5})
        assert ledger.effects() == {"pay-1": {"cents": 5}}  # requests are not effects
        assert ledger.check_exactly_once() == 1
        assert ledger.check_calls() == (1, 2)
        ledger.model("turn-1/model#1")  # paid again: in flight at a kill, or replay missed it
        assert ledger.repeated_model_calls() == 1
        with pytest.raises(DuplicateEffect, match=r"1 model request\(s\) paid again, 0 of them in flight"):
            ledger.check_calls()
        assert ledger.check_calls(resent=1) == (1, 3)
        ledger.record("pay-1", {"cents": 5})
        with pytest.raises(DuplicateEffect, match="1 side effect"):
            ledger.check_calls(resent=1)


# -- the copyable example ------------------------------------------------------------------------


def test_the_example_in_examples_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/test_my_agent_crash.py, as a user would copy it, passes."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "examples"))
    example = importlib.import_module("test_my_agent_crash")
    example.test_my_agent_survives_crashes(tmp_path)
