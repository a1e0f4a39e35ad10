"""``Run``: steps, pending actions and their reconciliation, budgets, human input (in-process).

A crash is simulated by a tool that raises ``Crash`` (a ``BaseException``, which the harness
does not handle): the process-level behaviour is the same as a SIGKILL between the pending
save and the next one — the store's head holds the action pending. Real SIGKILLs are in
``test_kit.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import safepoint
from safepoint import BudgetExceeded, Conflict, InvalidArgument, NotFound, Status, Store
from safepoint.harness import (
    ActionMismatch,
    Budget,
    PendingAction,
    Reconcile,
    Run,
    RunStatusError,
    idempotency_key,
)


class Crash(BaseException):
    """Stands in for the process dying inside a tool."""


def crash(key: str) -> Any:
    raise Crash


@pytest.fixture
def store() -> Iterator[Store]:
    with safepoint.open_store("memory://") as opened:
        yield opened


def crashed_run(store: Store, tool: str = "send_email", args: Any = None) -> PendingAction:
    """A run whose process died inside ``tool``: its head holds the action pending."""
    run = Run.open(store, "r", state={"sent": []})
    run.append({"role": "user", "content": "go"})
    run.commit()
    with pytest.raises(Crash):
        run.action(tool, args or {"to": "ada"}, crash)
    pending = store.load("r").pending_action
    assert pending is not None
    return PendingAction.from_json(pending)


def test_open_starts_a_run_and_resumes_it_with_its_bookkeeping(store: Store) -> None:
    """A reopened run has the messages, counters, cursors, state and budget it committed."""
    run = Run.open(store, "r", budget=Budget(tokens=1000), cursors={"batch": {"done": 0, "total": 3}})
    assert (run.step, run.steps, run.status) == (0, 0, Status.RUNNING)
    run.append({"role": "user", "content": "hi"})
    run.add_usage(tokens_in=100, tokens_out=20, spend=0.5)
    assert run.advance("batch") == 1
    run.state["seen"] = ["doc-0"]
    run.commit()
    again = Run.open(store, "r", budget=Budget(tokens=5))  # the stored budget wins
    assert again.step == 1
    assert again.steps == 1
    assert list(again.messages) == [{"role": "user", "content": "hi"}]
    assert again.counters["tokens_in"] == 100
    assert again.counters["spend"] == 0.5
    assert again.cursors == {"batch": {"done": 1, "total": 3}}
    assert again.state == {"seen": ["doc-0"]}
    assert again.budget == Budget(tokens=1000)
    assert again.remaining == Budget(tokens=880)


def test_start_refuses_an_existing_run_and_resume_a_missing_one(store: Store) -> None:
    """``start`` only creates (``Conflict``), ``resume`` only continues (``NotFound``)."""
    Run.start(store, "r")
    with pytest.raises(Conflict):
        Run.start(store, "r")
    with pytest.raises(NotFound):
        Run.resume(store, "missing")


def test_each_commit_is_one_checkpoint_and_state_stays_live_across_commits(store: Store) -> None:
    """A commit saves one checkpoint; ``run.state`` held across commits is still the live dict."""
    run = Run.start(store, "r")
    state, cursors = run.state, run.cursors
    for i in range(3):
        state[f"k{i}"] = i
        cursors["n"] = i
        run.append({"role": "assistant", "content": str(i)})
        run.commit()
    assert [info.step for info in store.history("r")] == [0, 1, 2, 3]
    head = store.load("r")
    assert head.state == {"k0": 0, "k1": 1, "k2": 2}
    assert head.cursors == {"n": 2}
    assert head.counters["steps"] == 3


def test_an_action_is_saved_pending_with_its_key_before_the_side_effect(store: Store) -> None:
    """Inside the tool, the store's head already holds the action, key included."""
    run = Run.start(store, "r")
    seen: list[dict[str, Any] | None] = []

    def tool(key: str) -> str:
        seen.append(store.load("r").pending_action)
        return f"sent with {key[:8]}"

    key = idempotency_key("r", 0, 0)
    assert run.action("send_email", {"to": "ada"}, tool) == f"sent with {key[:8]}"
    assert seen == [
        {"kind": "action", "tool": "send_email", "args": {"to": "ada"}, "key": key, "step": 0, "call": 0}
    ]
    run.commit()
    head = store.load("r")
    assert head.pending_action is None
    assert head.counters["actions"] == 1
    assert [info.step for info in store.history("r")] == [0, 1, 2]  # the pending save, then the commit


def test_idempotency_keys_follow_step_and_call_in_any_store(store: Store, tmp_path: Path) -> None:
    """Keys are sha256 of run, step and call index: the same in another store or process."""
    keys = []
    for opened in (store, safepoint.open_store(f"sqlite:///{tmp_path / 'other.db'}")):
        run = Run.start(opened, "r")
        got = [run.action("t", {}, lambda key: key), run.action("t", {}, lambda key: key)]
        run.commit()
        got.append(run.action("t", {}, lambda key: key))
        keys.append(got)
    assert keys[0] == keys[1]
    assert keys[0] == [idempotency_key("r", 0, 0), idempotency_key("r", 0, 1), idempotency_key("r", 1, 0)]
    assert len(set(keys[0])) == 3


def test_an_interrupted_action_without_a_hook_stops_the_run_waiting(store: Store) -> None:
    """No hook: the action is never repeated silently; the run waits, saying which action."""
    action = crashed_run(store)
    run = Run.resume(store, "r")
    assert run.status is Status.WAITING
    assert not run.active
    assert run.pending == action.waiting(run.question or "")
    assert "send_email" in (run.question or "")
    assert store.load("r").status is Status.WAITING
    with pytest.raises(RunStatusError):
        run.action("send_email", {}, lambda key: pytest.fail("must not run"))


def test_a_rerun_decision_calls_the_tool_again_with_the_same_key(store: Store) -> None:
    """``Reconcile.rerun()``: the replayed action's tool gets the crashed action's key."""
    action = crashed_run(store, "charge")
    run = Run.resume(store, "r", reconcile={"charge": Reconcile.rerun()})
    assert run.active
    assert run.pending == action
    keys: list[str] = []
    assert run.action("charge", {"to": "ada"}, lambda key: keys.append(key) or "charged") == "charged"
    assert keys == [action.key]
    run.commit()
    assert store.load("r").pending_action is None


def test_a_skip_decision_returns_the_hook_result_without_calling_the_tool(store: Store) -> None:
    """A hook that finds the effect happened: the action returns its result, the tool is not called."""
    action = crashed_run(store)
    seen: list[PendingAction] = []

    def already_sent(pending: PendingAction) -> Reconcile:
        seen.append(pending)
        return Reconcile.skip({"message_id": "m-1"})

    run = Run.resume(store, "r", reconcile={"send_email": already_sent})
    assert seen == [action]
    assert run.action("send_email", {"to": "ada"}, lambda key: pytest.fail("must not run")) == {
        "message_id": "m-1"
    }
    run.commit()
    assert run.counters["actions"] == 1


def test_a_human_settles_a_waiting_action_from_another_run_object(store: Store) -> None:
    """``resume_with(Reconcile.skip(...))`` answers the question; other answers are refused."""
    action = crashed_run(store)
    Run.resume(store, "r")  # waits
    with pytest.raises(InvalidArgument):
        Run.resume_with(store, "r", "yes it was sent")
    with pytest.raises(InvalidArgument):
        Run.resume_with(store, "r", Reconcile.wait())
    run = Run.resume_with(store, "r", Reconcile.skip("sent by hand"))
    assert run.active
    assert run.pending is not None
    assert run.pending.resolution == Reconcile.skip("sent by hand")
    assert run.pending.key == action.key
    assert run.action("send_email", {}, lambda key: pytest.fail("must not run")) == "sent by hand"
    run.finish()
    with pytest.raises(RunStatusError):
        Run.resume_with(store, "r", Reconcile.rerun())


def test_a_resumed_run_must_take_its_interrupted_action_first(store: Store) -> None:
    """Another tool, or a commit, while an action waits to be replayed is an ``ActionMismatch``."""
    crashed_run(store)
    run = Run.resume(store, "r", reconcile={"send_email": Reconcile.rerun()})
    with pytest.raises(ActionMismatch, match="send_email"):
        run.action("search", {}, lambda key: "hits")
    with pytest.raises(ActionMismatch):
        run.commit()


def test_a_tool_that_raises_leaves_nothing_pending(store: Store) -> None:
    """A tool's exception reaches the caller; the run goes on and its next save clears the action."""
    run = Run.start(store, "r")
    with pytest.raises(ZeroDivisionError):
        run.action("divide", {}, lambda key: 1 / 0)
    assert run.active
    run.commit()
    assert store.load("r").pending_action is None


def test_an_interrupted_tool_stays_pending_until_a_resume_settles_it(store: Store) -> None:
    """After a KeyboardInterrupt inside a tool, the run refuses to go on as if nothing happened."""
    run = Run.start(store, "r")

    def interrupted(key: str) -> str:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run.action("send_email", {}, interrupted)
    with pytest.raises(RunStatusError, match="interrupted"):
        run.commit()
    with pytest.raises(RunStatusError, match="interrupted"):
        run.action("search", {}, lambda key: "hits")
    assert Run.resume(store, "r").status is Status.WAITING


def test_a_sync_run_refuses_an_async_tool(store: Store) -> None:
    """An ``async def`` tool given to ``Run`` is refused with a typed error, not left un-awaited."""
    run = Run.start(store, "r")

    async def tool(key: str) -> str:
        return key

    with pytest.raises(InvalidArgument, match="AsyncRun"):
        run.action("t", {}, tool)


def test_token_budget_fails_the_run_and_stays_failed_on_resume(store: Store) -> None:
    """Going over the tokens budget saves the run as failed (usage recorded) and raises."""
    run = Run.start(store, "r", budget=Budget(tokens=100))
    run.add_usage(tokens_in=60, tokens_out=40)  # exactly the limit: fine
    run.commit()
    with pytest.raises(BudgetExceeded) as caught:
        run.add_usage(tokens_in=1)
    assert (caught.value.budget, caught.value.limit, caught.value.used) == ("tokens", 100, 101)
    head = store.load("r")
    assert head.status is Status.FAILED
    assert head.counters["tokens_in"] == 61
    assert not run.active
    resumed = Run.open(store, "r")
    assert resumed.status is Status.FAILED
    with pytest.raises(RunStatusError):
        resumed.add_usage(tokens_in=1)


def test_spend_budget_counts_across_resumes(store: Store) -> None:
    """Spend committed by an earlier process counts: the resumed run fails where the total goes over."""
    run = Run.start(store, "r", budget=Budget(spend=1.0))
    run.add_usage(spend=0.75)
    run.commit()
    run = Run.resume(store, "r")
    assert run.remaining.spend == 0.25
    with pytest.raises(BudgetExceeded, match="spend"):
        run.add_usage(spend=0.5)
    assert store.load("r").counters["spend"] == 1.25


def test_steps_budget_stops_a_run_still_going_at_its_last_step(store: Store) -> None:
    """``steps=2``: the second commit of a running run saves it failed; finishing there is fine."""
    run = Run.start(store, "r", budget=Budget(steps=2))
    run.commit()
    with pytest.raises(BudgetExceeded, match="steps"):
        run.commit()
    assert store.load("r").status is Status.FAILED
    done = Run.start(store, "d", budget=Budget(steps=2))
    done.commit()
    done.finish()
    assert store.load("d").status is Status.DONE


def test_waiting_at_the_step_limit_fails_when_answered(store: Store) -> None:
    """A run that used its last step asking a question cannot take another step on the answer."""
    run = Run.start(store, "r", budget=Budget(steps=1))
    run.wait_for_input("go on?")
    with pytest.raises(BudgetExceeded):
        Run.resume_with(store, "r", "yes")
    assert store.load("r").status is Status.FAILED


def test_budget_limits_are_validated() -> None:
    """Negative, non-finite or wrongly typed limits are refused with ``InvalidArgument``."""
    for bad in ({"tokens": -1}, {"steps": 1.5}, {"spend": float("inf")}, {"tokens": True}):
        with pytest.raises(InvalidArgument):
            Budget(**bad)


def test_human_input_is_the_next_input_of_the_resumed_run(store: Store) -> None:
    """``wait_for_input`` commits as waiting; ``resume_with`` delivers the answer to the next step."""
    run = Run.start(store, "r")
    run.wait_for_input("Which format?")
    assert run.status is Status.WAITING
    waiting = Run.resume(store, "r")
    assert (waiting.active, waiting.question, waiting.has_input) == (False, "Which format?", False)
    answered = Run.resume_with(store, "r", "pdf")
    assert (answered.active, answered.has_input) == (True, True)
    answered.append({"role": "user", "content": answered.take_input()})
    answered.finish()
    head = store.load("r")
    assert head.status is Status.DONE
    assert head.messages[-1] == {"role": "user", "content": "pdf"}
    assert head.counters["steps"] == 2


def test_an_answer_survives_a_crash_until_it_is_taken(store: Store) -> None:
    """The answer is stored by ``resume_with``; a crash before it is used loses nothing."""
    Run.start(store, "r").wait_for_input("Which format?")
    Run.resume_with(store, "r", {"format": "pdf"})  # this process then "dies"
    run = Run.resume(store, "r")
    assert run.has_input
    with pytest.raises(RunStatusError, match="take the human input"):
        run.action("t", {}, lambda key: key)
    answer = run.take_input()
    assert answer == {"format": "pdf"}
    assert not run.has_input
    run.append({"role": "user", "content": answer["format"]})
    run.commit()
    assert store.load("r").pending_action is None
    with pytest.raises(RunStatusError):
        Run.resume_with(store, "r", "again")


def test_secrets_come_back_only_when_asked(tmp_path: Path) -> None:
    """``resolve_secrets`` goes to ``store.load``: values in memory, references in the store."""
    secrets = safepoint.Secrets().add("API_KEY", "sk-test-0123456789abcdef")
    with safepoint.open_store(f"sqlite:///{tmp_path / 's.db'}", secrets=secrets) as store:
        run = Run.start(store, "r", state={"key": "sk-test-0123456789abcdef"})
        run.commit()
        assert Run.resume(store, "r").state["key"] == {"$secret": "API_KEY"}
        assert Run.resume(store, "r", resolve_secrets=True).state["key"] == "sk-test-0123456789abcdef"


def test_finished_runs_refuse_more_work(store: Store) -> None:
    """After ``finish`` (or any stop), steps, actions and input are refused with ``RunStatusError``."""
    run = Run.start(store, "r")
    run.finish()
    for attempt in (run.commit, lambda: run.append({}), lambda: run.action("t", {}, str), run.take_input):
        with pytest.raises(RunStatusError):
            attempt()
    assert not Run.open(store, "r").active
