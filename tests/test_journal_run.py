"""``Run`` on the call journal: ``run.action`` records its result, ``run.call`` records any call
whose result a resumed run reuses (in-process; real SIGKILLs are in ``test_journal_run_crash.py``).

A crash is simulated as in ``test_harness.py``: a tool or model that raises ``Crash`` (a
``BaseException`` the harness does not handle) dies mid-call; a ``Run`` closed without a commit
dies after its calls returned. Either way the store holds exactly what a SIGKILL would leave:
the last checkpoint, and the journal entries written before the "kill".
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import safepoint
from safepoint import BudgetExceeded, Keyring, LeaseLost, NotJSONCompatible, Status, Store
from safepoint.harness import ActionMismatch, AsyncRun, Budget, PendingAction, Reconcile, Run, idempotency_key
from safepoint.journal import CallUsage

SECRET = "sk-test-0123456789abcdef"


class Crash(BaseException):
    """Stands in for the process dying inside a call."""


class Model:
    """A scripted model: its reply and usage are a function of the request; it counts its calls."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        prompt = str(request["prompt"])
        return {"text": f"reply to {prompt}", "usage": {"in": 10 * len(prompt), "out": 7}}


def usage(reply: dict[str, Any]) -> CallUsage:
    return CallUsage(reply["usage"]["in"], reply["usage"]["out"], reply["usage"]["in"] / 1000)


class Tool:
    """A non-idempotent tool: every call takes effect (kept in ``effects``)."""

    def __init__(self) -> None:
        self.effects: list[str] = []

    def __call__(self, key: str) -> dict[str, Any]:
        self.effects.append(key)
        return {"receipt": len(self.effects)}


def must_not_be_asked(action: PendingAction) -> Reconcile:
    raise AssertionError(f"the reconcile hook of {action.tool!r} was asked")


@pytest.fixture
def store() -> Iterator[Store]:
    with safepoint.open_store("memory://") as opened:
        yield opened


def step(run: Run, model: Model, tool: Tool) -> Any:
    """One step of a small agent: two model calls around a payment."""
    first = run.call("model", {"prompt": "plan"}, model, usage=usage)
    receipt = run.action("pay", {"amount": 5}, tool)
    second = run.call("model", {"prompt": f"paid {receipt['receipt']}"}, model, usage=usage)
    return first, receipt, second


def uninterrupted_counters() -> dict[str, Any]:
    with safepoint.open_store("memory://") as fresh, Run.open(fresh, "r") as run:
        step(run, Model(), Tool())
        run.commit()
        return dict(run.counters)


# -- run.action ---------------------------------------------------------------------------


def test_an_action_resumed_after_its_result_was_recorded_returns_it_without_the_tool_or_its_hook(
    store: Store,
) -> None:
    """Killed after the tool returned but before the commit: the resumed run gets the recorded
    result back; neither the tool nor its reconcile hook is called, and the effect happened once."""
    tool = Tool()
    with Run.open(store, "r") as run:
        receipt = run.action("pay", {"amount": 5}, tool)  # ... and the process dies before the commit
    assert store.load("r").pending_action is not None  # the head: the action pending
    with Run.open(store, "r", reconcile={"pay": must_not_be_asked}) as run:
        assert run.pending is not None
        assert run.action("pay", {"amount": 5}, tool) == receipt
        assert (run.journal.replayed, run.journal.called, run.journal.reconciled) == (1, 0, 0)
        run.commit()
        assert run.counters["actions"] == 1
    assert tool.effects == [idempotency_key("r", 0, 0)]


def test_an_action_with_no_recorded_result_goes_to_its_hook_which_sees_its_key(store: Store) -> None:
    """Killed inside the tool (after its effect, before the record): the hook decides, and the
    result it gives is recorded, so a second crash needs no hook."""
    effects: list[str] = []

    def pay_then_die(key: str) -> Any:
        effects.append(key)
        raise Crash

    with Run.open(store, "r") as run, pytest.raises(Crash):
        run.action("pay", {"amount": 5}, pay_then_die)
    asked: list[str] = []

    def look_up(action: PendingAction) -> Reconcile:
        asked.append(action.key)
        return Reconcile.skip({"receipt": "found"}) if action.key in effects else Reconcile.rerun()

    with Run.open(store, "r", reconcile={"pay": look_up}) as run:
        assert run.journal.reconciled == 1
        assert run.action("pay", {"amount": 5}, Tool()) == {"receipt": "found"}
    assert asked == effects == [idempotency_key("r", 0, 0)]
    with Run.open(store, "r", reconcile={"pay": must_not_be_asked}) as run:
        assert run.action("pay", {"amount": 5}, Tool()) == {"receipt": "found"}


def test_a_rerun_records_its_result_and_a_human_answer_is_not_applied_twice(store: Store) -> None:
    """No hook: the run waits; the human says rerun; the rerun's result is recorded — a crash
    after it resumes with that result instead of taking the action a third time."""
    tool = Tool()
    with Run.open(store, "r") as run, pytest.raises(Crash):
        run.action("pay", {"amount": 5}, lambda key: (_ for _ in ()).throw(Crash))
    with Run.open(store, "r") as run:
        assert run.status is Status.WAITING
    with Run.resume_with(store, "r", Reconcile.rerun()) as run:
        receipt = run.action("pay", {"amount": 5}, tool)  # dies before the commit
    with Run.open(store, "r") as run:  # the head still holds the human's "rerun"
        assert run.action("pay", {"amount": 5}, tool) == receipt
        assert run.journal.replayed == 1
    assert len(tool.effects) == 1


def test_a_result_that_is_not_json_is_returned_unrecorded_and_the_hook_keeps_its_job(store: Store) -> None:
    """A tool returning an object JSON cannot hold: the action returns it, ``journal.unrecorded``
    counts it, and after a crash the hook decides, as without the journal."""
    handle = object()
    with Run.open(store, "r") as run:
        assert run.action("open_socket", {}, lambda key: handle) is handle
        assert run.journal.unrecorded == 1
    with Run.open(store, "r", reconcile={"open_socket": Reconcile.skip("reopened")}) as run:
        assert run.journal.reconciled == 1
        assert run.action("open_socket", {}, lambda key: handle) == "reopened"


# -- run.call ------------------------------------------------------------------------------


def test_calls_made_before_a_crash_are_replayed_in_order_and_counted_once(store: Store) -> None:
    """Killed before the commit: the resumed step's model calls come from the journal, the
    payment from its recorded result; the counters equal an uninterrupted run's."""
    model, tool = Model(), Tool()
    with Run.open(store, "r") as run:
        made = step(run, model, tool)  # ... dies before the commit
    assert len(model.requests) == 2
    with Run.open(store, "r", reconcile={"pay": must_not_be_asked}) as run:
        assert run.action("pay", {"amount": 5}, tool) == made[1]  # the pending action comes first
        again = run.call("model", {"prompt": "paid 1"}, model, usage=usage)
        assert again == made[2]
        run.commit()
        assert dict(run.counters) == uninterrupted_counters()
        assert (run.journal.replayed, run.journal.called) == (2, 0)
    assert (len(model.requests), len(tool.effects)) == (2, 1)


def test_a_step_redone_from_its_last_commit_replays_each_call_by_its_place(store: Store) -> None:
    """Killed after the calls of a step with no action: the redone step replays them by place
    (the same name twice gets two entries); tokens and spend are counted once."""
    model = Model()
    with Run.open(store, "r") as run:
        run.commit()
        first = [run.call("model", {"prompt": p}, model, usage=usage) for p in ("a", "b")]
    with Run.open(store, "r") as run:
        assert [run.call("model", {"prompt": p}, model, usage=usage) for p in ("a", "b")] == first
        assert run.journal.keys == ["call:1.0:model", "call:1.1:model"]
        assert (run.counters["tokens_in"], run.counters["tokens_out"]) == (20, 14)
        assert run.counters["spend"] == 0.02
    assert len(model.requests) == 2


def test_a_changed_request_is_called_recorded_and_counted_as_a_divergence(store: Store) -> None:
    """Replay is not caching: a request that differs from the recorded one is sent, and its
    own usage counted; only the request the entry was recorded for replays."""
    model = Model()
    with Run.open(store, "r") as run:
        run.call("model", {"prompt": "a"}, model, usage=usage)
    with Run.open(store, "r") as run:
        assert run.call("model", {"prompt": "abc"}, model, usage=usage)["text"] == "reply to abc"
        assert (run.journal.divergences, run.journal.called, run.journal.replayed) == (1, 1, 0)
        assert run.counters["tokens_in"] == 30
    with Run.open(store, "r") as run:  # both entries are kept: each replays for its own request
        assert run.call("model", {"prompt": "abc"}, model, usage=usage)["text"] == "reply to abc"
        assert (run.journal.divergences, run.journal.replayed) == (1, 1)
    assert [r["prompt"] for r in model.requests] == ["a", "abc"]


def test_a_call_in_flight_at_a_crash_is_resent_once_and_its_cost_kept_apart(store: Store) -> None:
    """Killed while the model answered: the request is sent again (``journal.resent``), its
    usage counted once in the counters and again, as an estimate, in ``lost_*``."""
    model = Model()

    def answer_then_die(request: dict[str, Any]) -> Any:
        model(request)
        raise Crash

    with Run.open(store, "r") as run, pytest.raises(Crash):
        run.call("model", {"prompt": "a"}, answer_then_die, usage=usage)
    with Run.open(store, "r") as run:
        run.call("model", {"prompt": "a"}, model, usage=usage)
        assert (run.journal.resent, run.journal.lost_tokens_in) == (1, 10)
        counters = run.counters
        assert (counters["tokens_in"], counters["lost_calls"], counters["lost_tokens_in"]) == (10, 1, 10)
        assert (counters["lost_tokens_out"], counters["lost_spend"]) == (7, 0.01)
        run.commit()
    assert Run.open(store, "r").counters["lost_calls"] == 1  # kept with the run, apart from its usage
    assert len(model.requests) == 2


def test_a_call_that_raised_is_retried_at_its_place_and_not_counted_lost(store: Store) -> None:
    """A provider error: the caller retries in the same step; the retry takes the failed call's
    place (so a resumed run replays it there) and is no lost call."""
    model, failures = Model(), [RuntimeError("overloaded")]

    def flaky(request: dict[str, Any]) -> Any:
        if failures:
            raise failures.pop()
        return model(request)

    with Run.open(store, "r") as run:
        with pytest.raises(RuntimeError):
            run.call("model", {"prompt": "a"}, flaky, usage=usage)
        reply = run.call("model", {"prompt": "a"}, flaky, usage=usage)
        assert (run.journal.resent, run.counters.get("lost_calls")) == (0, None)
    with Run.open(store, "r") as run:
        assert run.call("model", {"prompt": "a"}, model, usage=usage) == reply
        assert run.journal.keys == ["call:0.0:model"]


def test_budgets_apply_to_replayed_usage_as_to_added_usage(store: Store) -> None:
    """A run going over its token budget on its second call goes over at that call also when
    its first call is replayed after a crash: saved failed, ``BudgetExceeded``, same counters."""
    model = Model()
    for run_id, crashes in (("uninterrupted", False), ("crashed", True)):
        with Run.open(store, run_id, budget=Budget(tokens=30)) as run:
            run.call("model", {"prompt": "a"}, model, usage=usage)
            if not crashes:
                with pytest.raises(BudgetExceeded):
                    run.call("model", {"prompt": "b"}, model, usage=usage)
        if crashes:
            with Run.open(store, run_id) as run:
                run.call("model", {"prompt": "a"}, model, usage=usage)  # replayed: 17 tokens
                with pytest.raises(BudgetExceeded):
                    run.call("model", {"prompt": "b"}, model, usage=usage)  # made: 34, over 30
    failed = [store.load(run_id) for run_id in ("uninterrupted", "crashed")]
    assert [cp.status for cp in failed] == [Status.FAILED, Status.FAILED]
    assert failed[0].counters == failed[1].counters
    assert [r["prompt"] for r in model.requests] == ["a", "b", "a", "b"]


def test_a_result_that_is_not_json_is_refused_with_its_usage_counted(store: Store) -> None:
    """``run.call`` records or refuses: a result JSON cannot hold raises ``NotJSONCompatible``
    (a request too, before the call), and the usage of the call made is still counted."""
    with Run.open(store, "r") as run:
        with pytest.raises(NotJSONCompatible):
            run.call("model", {"prompt": "a"}, lambda r: {1, 2}, usage=lambda r: CallUsage(5, 1))
        assert run.counters["tokens_in"] == 5
        with pytest.raises(NotJSONCompatible):
            run.call("model", {"prompt": {1, 2}}, lambda r: pytest.fail("sent"))


def test_a_resumed_run_takes_its_interrupted_action_before_any_call(store: Store) -> None:
    """The interrupted action is the step's next journaled call: a ``run.call`` first would take
    its place, so it raises ``ActionMismatch``."""
    with Run.open(store, "r") as run, pytest.raises(Crash):
        run.action("pay", {}, lambda key: (_ for _ in ()).throw(Crash))
    with Run.open(store, "r", reconcile={"pay": Reconcile.rerun()}) as run, pytest.raises(ActionMismatch):
        run.call("model", {"prompt": "a"}, Model())


def test_actions_and_calls_share_the_places_of_a_step(store: Store) -> None:
    """An action's key is ``idempotency_key(run, step, place)``, its place counting the step's
    calls before it; a resumed step gives every call the place it had."""
    keys: list[str] = []
    with Run.open(store, "r") as run:
        run.call("model", {"prompt": "a"}, Model())
        run.action("pay", {}, keys.append)
        run.commit()
        run.action("pay", {}, keys.append)
    assert keys == [idempotency_key("r", 0, 1), idempotency_key("r", 1, 0)]


def test_a_writer_that_lost_the_run_records_nothing(store: Store) -> None:
    """Journal writes go under the ``Run``'s lease: a ``Run`` another opener took over raises
    ``LeaseLost`` and its call is neither made nor recorded."""
    model = Model()
    stale = Run.open(store, "r")
    taken = Run.open(store, "r")  # the same thread: the first one was left behind
    with pytest.raises(LeaseLost):
        stale.call("model", {"prompt": "a"}, model)
    assert model.requests == []
    assert store.recorded_calls("r") == []
    taken.close()


def test_under_a_workers_lease_entries_name_it_and_a_revoked_lease_writes_nothing(store: Store) -> None:
    """A handler's ``Run`` (``lease=job.lease``) records under the worker's lease; once the lease
    is revoked, its next call raises ``LeaseLost`` and neither the call nor an entry happens."""
    store.save(safepoint.Checkpoint(run_id="r"))
    store.enqueue("r")
    lease = store.claim("w1", lease=30)
    assert lease is not None
    model = Model()
    run = Run.open(store, "r", lease=lease)
    run.call("model", {"prompt": "a"}, model)
    run.action("pay", {}, Tool())
    assert [(e.writer, e.epoch) for e in store.recorded_calls("r")] == [(lease.worker_id, lease.epoch)] * 2
    store.revoke_lease("r")
    with pytest.raises(LeaseLost):
        run.call("model", {"prompt": "b"}, model)
    assert len(model.requests) == 1
    assert len(store.recorded_calls("r")) == 2


# -- the store's sides: async, encrypted, secrets -------------------------------------------


def test_async_run_replays_calls_and_actions_with_async_functions(tmp_path: Path) -> None:
    """``AsyncRun``: async model and tool; after a crash both come from the journal."""
    model, tool = Model(), Tool()

    async def amodel(request: dict[str, Any]) -> Any:
        await asyncio.sleep(0)
        return model(request)

    async def atool(key: str) -> Any:
        return tool(key)

    async def scenario() -> None:
        store = await safepoint.open_async_store(f"sqlite:///{tmp_path / 's.db'}")
        try:
            async with await AsyncRun.open(store, "r") as run:
                reply = await run.call("model", {"prompt": "a"}, amodel, usage=usage)
                receipt = await run.action("pay", {}, atool)
            async with await AsyncRun.open(store, "r", reconcile={"pay": must_not_be_asked}) as run:
                assert await run.action("pay", {}, atool) == receipt
                assert run.journal.replayed == 1
                await run.commit()
            async with await AsyncRun.open(store, "r") as run:
                assert (run.counters["tokens_in"], reply["text"]) == (10, "reply to a")
        finally:
            await store.close()

    asyncio.run(scenario())
    assert (len(model.requests), len(tool.effects)) == (1, 1)


def test_an_encrypted_store_records_and_replays_sealed(tmp_path: Path) -> None:
    """On an encrypted SQLite store the journal's results are sealed (no plaintext in the file)
    and replay after a crash like any others."""
    ring = Keyring.from_text(
        f"index:{base64.b64encode(bytes(range(32))).decode()} k1:{base64.b64encode(b'1' * 32).decode()}"
    )
    path, model = tmp_path / "s.db", Model()
    with safepoint.open_store(f"sqlite:///{path}", encryption=ring) as store:
        with Run.open(store, "r") as run:
            reply = run.call("model", {"prompt": "confidential-plan"}, model, usage=usage)
        with Run.open(store, "r") as run:
            assert run.call("model", {"prompt": "confidential-plan"}, model, usage=usage) == reply
            assert run.journal.replayed == 1
    assert b"reply to confidential-plan" not in path.read_bytes()
    assert len(model.requests) == 1


def test_replay_resolves_secrets_as_the_run_was_loaded(tmp_path: Path) -> None:
    """A registered secret in a result is stored as a reference; replayed, it comes back as a
    reference, or as the value for a run resumed with ``resolve_secrets``."""
    secrets = safepoint.Secrets().add("API_KEY", SECRET)
    reference = {"key": {"$secret": "API_KEY"}}
    with safepoint.open_store(f"sqlite:///{tmp_path / 's.db'}", secrets=secrets) as store:
        with Run.open(store, "call") as run:
            assert run.call("model", {"prompt": "a"}, lambda r: {"key": SECRET}) == {"key": SECRET}
        with Run.open(store, "call") as run:
            assert run.call("model", {"prompt": "a"}, pytest.fail) == reference
        with Run.open(store, "call", resolve_secrets=True) as run:
            assert run.call("model", {"prompt": "a"}, pytest.fail) == {"key": SECRET}
        with Run.open(store, "action") as run:
            assert run.action("fetch_key", {}, lambda key: {"key": SECRET}) == {"key": SECRET}
        with Run.open(store, "action") as run:
            assert run.action("fetch_key", {}, pytest.fail) == reference
        with Run.open(store, "action", resolve_secrets=True) as run:
            assert run.action("fetch_key", {}, pytest.fail) == {"key": SECRET}
