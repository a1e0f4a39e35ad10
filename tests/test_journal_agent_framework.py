"""The Agent Framework's call journal (``CallJournal``) with real workflows: two ``AgentExecutor``s
over offline scripted chat clients (``helpers/maf_journal_app.py``), a real SQLite store.

A workflow run here is cut mid-superstep inside the process by an exception
no code catches (``Crash``, raised right after a tool's effect or by a model
request), then resumed from the latest checkpoint by a fresh journal and a
fresh workflow (as another process would) or by the same ones; the
SIGKILLed version, in real child processes, is
``test_journal_agent_framework_crash.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, AgentExecutor, InMemoryCheckpointStorage, WorkflowBuilder, tool

import safepoint
from adapter_checks import BACKEND_KINDS, backend_store
from helpers import maf_journal_app as app
from safepoint import InvalidArgument, Reconcile, RunHeld, SafepointError
from safepoint.adapters.agent_framework import (
    CallJournal,
    CheckpointNotFound,
    SafepointCheckpointStorage,
    current_call_key,
    layout,
    non_idempotent,
)
from safepoint.adapters.agent_framework import framework as af_framework
from safepoint.adapters.agent_framework.layout import workflow_run_id
from safepoint.journal import ActionWaiting, holding, resends
from safepoint.testing.crash import Effect, Ledger

ASKED = "refund order 1"
ANSWER = app.AUDITOR[-1]


class Crash(BaseException):
    """What cuts a workflow run short here: nothing in the framework or the journal catches it."""


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "ledger.db") as opened:
        app.LEDGER["ledger"] = opened
        yield opened
    app.LEDGER["ledger"] = None


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[SafepointCheckpointStorage]:
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}")
    yield SafepointCheckpointStorage(store)
    store.close()


def crash_after(ledger: Ledger, kind: str) -> None:
    """Raise ``Crash`` right after the ledger's next effect of ``kind`` (``record``: a payment)."""

    def hook(effect: Effect) -> None:
        if effect.kind == kind:
            ledger.on_effect = None
            raise Crash

    ledger.on_effect = hook


def run(journal: CallJournal, workflow: Any, message: Any = None, **kwargs: Any) -> Any:
    return asyncio.run(journal.run(workflow, message, **kwargs))


def latest(storage: SafepointCheckpointStorage, name: str = app.NAME) -> Any:
    found = asyncio.run(storage.get_latest(workflow_name=name))
    assert found is not None
    return found


def resume(journal: CallJournal, workflow: Any, storage: SafepointCheckpointStorage) -> Any:
    """The documented resume: the workflow's latest checkpoint, through the journal."""
    cut = latest(storage, workflow.name)
    assert cut.messages, "the cut run's latest checkpoint still has messages to deliver"
    return run(journal, workflow, checkpoint_id=cut.checkpoint_id)


def cut_run(storage: SafepointCheckpointStorage, ledger: Ledger, kind: str = "record") -> None:
    """A workflow run cut right after the ledger's first effect of ``kind``."""
    crash_after(ledger, kind)
    with pytest.raises(Crash):
        run(CallJournal(storage), app.build(storage), ASKED)


def entries(storage: SafepointCheckpointStorage, run_id: str = app.RUN_ID) -> dict[str, Any]:
    """The run's recorded calls by key (not the ``resumed:<checkpoint>`` notes of resumes, nor the
    markers of re-sent calls)."""
    calls = storage.store.recorded_calls(run_id)
    return {e.key: e for e in calls if e.key.startswith('["') and resends.sent_key(e.key) is None}


def test_the_framework_names_the_journal_relies_on_are_there(storage: SafepointCheckpointStorage) -> None:
    """The framework's non-public names (framework.py) still exist in the installed release."""
    workflow = app.build(storage)
    assert af_framework.superstep(workflow) == 1
    executors = af_framework.agent_executors(workflow)
    assert [e.id for e in executors] == ["clerk", "auditor"]
    assert af_framework.session_of(executors[0]) is not None
    assert af_framework.call_id({"call_id": "c-1"}) == "c-1"


def test_every_call_is_recorded_and_the_checkpoints_carry_the_counters(
    storage: SafepointCheckpointStorage, ledger: Ledger
) -> None:
    """A clean run records its 5 responses and 4 tool results under their places' keys; the head
    checkpoint counts tokens from each response's usage once and spend from the user's price."""
    journal = CallJournal(storage, spend=lambda response: response.usage_details["output_token_count"] / 1000)
    assert app.answer(run(journal, app.build(storage), ASKED)) == ANSWER
    turn = journal.last_turn
    assert turn is not None
    assert (turn.models.called, turn.models.replayed, turn.tools.called, turn.tools.replayed) == (5, 0, 4, 0)
    found = entries(storage)
    assert all(e.done for e in found.values())
    places = sorted(place(key) for key in found)
    h = hashlib.sha256(ASKED.encode()).hexdigest()[:6]  # the scripted model's call ids carry it
    assert places == sorted(
        [(1, "clerk", f"model#{n}") for n in range(3)]
        + [(2, "auditor", f"model#{n}") for n in range(2)]
        + [(1, "clerk", f"tool:lookup|clerk-0-0-{h}"), (2, "auditor", f"tool:lookup|auditor-0-0-{h}")]
        + [(1, "clerk", f"tool:charge|clerk-1-{j}-{h}") for j in range(2)]
    )
    # The tools got their journal keys as idempotency keys.
    charged = [e.key for e in ledger.calls() if e.kind == "record"]
    assert len(charged) == 2
    assert all(found[key].done for key in charged)
    counters = storage.store.load(app.RUN_ID).counters
    model_entries = [e for e in found.values() if "|model#" in e.key]
    assert counters["tokens_in"] == sum(e.usage.tokens_in for e in model_entries) > 0
    assert counters["tokens_out"] == sum(e.usage.tokens_out for e in model_entries) > 0
    assert counters["spend"] == pytest.approx(counters["tokens_out"] / 1000)
    assert (counters["model_calls"], counters["tool_calls"], counters["resent_calls"]) == (5, 4, 0)
    assert ledger.check_usage(dict(counters)) == {"tokens_in": 0, "tokens_out": 0}


def place(key: str) -> tuple[int, str, str]:
    """A key's superstep, executor and call (its root, a checkpoint id, left out)."""
    stem, call = key.split("|", 1)
    _, superstep, executor = json.loads(stem)
    return superstep, executor, call


@pytest.mark.parametrize("objects", ["fresh", "reused"])
def test_a_run_cut_mid_superstep_resumes_without_requesting_or_doing_anything_again(
    objects: str, storage: SafepointCheckpointStorage, ledger: Ledger
) -> None:
    """Cut right after the first payment: the resume (a fresh journal and workflow, as another
    process builds them, or the same ones) replays the recorded responses and the lookup, asks
    the charge's hook about the payment in flight, and ends with the uninterrupted answer."""
    journal, workflow = CallJournal(storage), app.build(storage)
    crash_after(ledger, "record")
    with pytest.raises(Crash):
        run(journal, workflow, ASKED)
    assert ledger.model_calls() == 2  # the clerk's first two requests, recorded
    if objects == "fresh":
        journal, workflow = CallJournal(storage), app.build(storage)
    assert app.answer(resume(journal, workflow, storage)) == ANSWER
    turn = journal.last_turn
    assert turn is not None
    assert (turn.models.replayed, turn.models.called, turn.models.resent) == (2, 3, 0)
    # The lookup replays; the payment in flight goes to its hook (it happened: skip); the parallel
    # payment replays or is settled the same way, depending on how far it got before the cut.
    assert turn.tools.replayed >= 1
    assert turn.tools.reconciled >= 1
    assert turn.tools.called + turn.tools.replayed + turn.tools.skipped == 4
    assert ledger.check_calls() == (4, 5)  # every effect once, every request paid once
    counters = storage.store.load(app.RUN_ID).counters
    assert (counters["model_calls"], counters["tool_calls"], counters["resent_calls"]) == (5, 4, 0)
    assert ledger.check_usage(dict(counters)) == {"tokens_in": 0, "tokens_out": 0}


@pytest.mark.parametrize("kind", BACKEND_KINDS)
def test_resume_on_every_backend(kind: str, tmp_path: Path, ledger: Ledger) -> None:
    """The cut-and-resume run on SQLite and PostgreSQL, through a Store and an AsyncStore."""

    async def scenario() -> None:
        async with backend_store(kind, tmp_path) as store:
            storage = SafepointCheckpointStorage(store)
            crash_after(ledger, "record")
            with pytest.raises(Crash):
                await CallJournal(storage).run(app.build(storage), ASKED)
            cut = await storage.get_latest(workflow_name=app.NAME)
            assert cut is not None
            journal = CallJournal(storage, wait=0)
            result = await journal.run(app.build(storage), checkpoint_id=cut.checkpoint_id)
            assert app.answer(result) == ANSWER
            assert journal.last_turn is not None
            assert journal.last_turn.models.replayed == 2

    asyncio.run(scenario())
    assert ledger.check_calls() == (4, 5)


def test_a_second_resume_of_the_same_checkpoint_replays_the_first_and_pays_nothing(
    storage: SafepointCheckpointStorage, ledger: Ledger
) -> None:
    """A process that waited for the first resume's lease (or a retry) resumes the same cut
    checkpoint after it, no longer the latest: it replays all the first resume recorded — not a
    new branch — pays nothing, answers the same, and the counters count each call once."""
    cut_run(storage, ledger)
    cut = latest(storage)
    assert (
        app.answer(run(CallJournal(storage), app.build(storage), checkpoint_id=cut.checkpoint_id)) == ANSWER
    )
    first = dict(storage.store.load(app.RUN_ID).counters)
    paid, before = ledger.model_calls(), entries(storage)
    journal = CallJournal(storage)
    assert app.answer(run(journal, app.build(storage), checkpoint_id=cut.checkpoint_id)) == ANSWER
    turn = journal.last_turn
    assert turn is not None
    assert (turn.models.called, turn.models.replayed, turn.tools.called) == (0, 5, 0)
    assert ledger.model_calls() == paid
    assert ledger.check_calls() == (4, 5)
    assert entries(storage).keys() == before.keys()
    assert dict(storage.store.load(app.RUN_ID).counters) == first


def test_a_model_request_in_flight_is_sent_again_and_counted_apart(
    storage: SafepointCheckpointStorage, ledger: Ledger
) -> None:
    """Cut while the auditor's first request was at the provider (paid, its answer lost): the
    resume sends it again and counts it as re-sent, its usage an estimate apart from the counters."""

    def hook(effect: Effect) -> None:
        if effect.kind == "model" and effect.key.startswith("auditor#0"):
            ledger.on_effect = None
            raise Crash

    ledger.on_effect = hook
    with pytest.raises(Crash):
        run(CallJournal(storage), app.build(storage), ASKED)
    journal = CallJournal(storage)
    assert app.answer(resume(journal, app.build(storage), storage)) == ANSWER
    assert journal.last_turn is not None
    assert journal.last_turn.models.resent == 1
    assert ledger.repeated_model_calls() == 1
    counters = dict(storage.store.load(app.RUN_ID).counters)
    assert (counters["model_calls"], counters["resent_calls"]) == (5, 1)
    again = ledger.check_usage(counters)  # paid = counters + the re-sent request
    assert again["tokens_in"] == counters["lost_tokens_in_estimate"] > 0


def test_a_changed_request_is_not_replayed(storage: SafepointCheckpointStorage, ledger: Ledger) -> None:
    """Resumed with the clerk's instructions changed, its recorded first response is not given
    back: the request is sent, recorded under a key of its own, and counted as a divergence."""
    cut_run(storage, ledger, "once")  # right after the lookup: the clerk's first response recorded
    before = set(entries(storage))
    journal = CallJournal(storage)
    assert app.answer(resume(journal, app.build(storage, instructions="Be brief."), storage)) == ANSWER
    turn = journal.last_turn
    assert turn is not None
    assert (turn.models.divergences, turn.models.replayed, turn.models.called) == (1, 0, 5)
    found = entries(storage)
    first = next(key for key in before if key.endswith("|model#0"))
    assert found[first].done  # the old entry stays as it was
    diverged = [key for key in set(found) - before if key.startswith(first + "~")]
    assert len(diverged) == 1
    assert found[diverged[0]].done


@pytest.mark.parametrize(
    ("decision", "charged_twice"),
    [(Reconcile.rerun(), True), (Reconcile.skip("charged (settled by hand)"), False)],
    ids=["rerun", "skip"],
)
def test_a_payment_in_flight_goes_to_its_reconcile_hook(
    decision: Reconcile, charged_twice: bool, storage: SafepointCheckpointStorage, ledger: Ledger
) -> None:
    """The journal's ``non_idempotent`` option (it wins over ``@non_idempotent``'s hook): rerun
    pays again, skip records the hook's result; each reconciled call counts once in tool_calls."""
    cut_run(storage, ledger)
    paid = next(e.key for e in ledger.calls() if e.kind == "record")
    journal = CallJournal(storage, non_idempotent={"charge": decision})
    assert app.answer(resume(journal, app.build(storage), storage)) == ANSWER
    turn = journal.last_turn
    assert turn is not None
    assert turn.tools.reconciled >= 1
    assert ledger.counts(("record",))[paid] == (2 if charged_twice else 1)
    if not charged_twice:
        assert entries(storage)[paid].result == "charged (settled by hand)"
    counters = storage.store.load(app.RUN_ID).counters
    assert counters["tool_calls"] == 4


@pytest.mark.parametrize("hook", [Reconcile.wait("did the payment go through?"), None], ids=["wait", "none"])
def test_a_payment_in_flight_with_wait_stops_the_run_until_decided(
    hook: Reconcile | None, storage: SafepointCheckpointStorage, ledger: Ledger
) -> None:
    """``wait`` (or no hook) stops the resumed run with ``ActionWaiting`` — never a tool error the
    model reads — and nothing is paid; once decided, the run is continued from the same place."""
    cut_run(storage, ledger)
    paid, charged = ledger.model_calls(), next(e.key for e in ledger.calls() if e.kind == "record")
    with pytest.raises(ActionWaiting) as waiting:
        resume(CallJournal(storage, non_idempotent={"charge": hook}), app.build(storage), storage)
    assert waiting.value.tool == "charge"
    assert waiting.value.run_id == app.RUN_ID
    if hook is not None:
        assert waiting.value.question == "did the payment go through?"
    assert ledger.model_calls() == paid  # the model never saw the interrupted call
    ledger.check_exactly_once()  # DuplicateEffect if the payment in flight was made again
    assert ledger.counts(("record",))[charged] == 1
    # Decided (the tool's own hook asks the ledger): the run goes on and ends as uninterrupted.
    journal = CallJournal(storage)
    assert app.answer(resume(journal, app.build(storage), storage)) == ANSWER
    assert ledger.check_calls() == (4, 5)


def test_a_reconcile_hook_deciding_nothing_stops_the_run_fail_closed(
    storage: SafepointCheckpointStorage, ledger: Ledger
) -> None:
    """A hook that returns no ``Reconcile`` (or fails) stops the run with the journal's error —
    never a tool error the model would read and go on past — and the payment is not made again."""
    cut_run(storage, ledger)
    paid = ledger.model_calls()
    journal = CallJournal(storage, non_idempotent={"charge": lambda key, name, args: "yes"})
    with pytest.raises(InvalidArgument, match="reconcile hook of tool 'charge'"):
        resume(journal, app.build(storage), storage)

    def broken(key: str, name: str, args: Any) -> Reconcile:
        raise LookupError("the payment service is down")

    with pytest.raises(Exception, match="call journal stopped tool 'charge'") as stopped:
        resume(CallJournal(storage, non_idempotent={"charge": broken}), app.build(storage), storage)
    assert not isinstance(stopped.value, Crash)
    assert ledger.model_calls() == paid  # the model never read an error and went on
    ledger.check_exactly_once()


def test_a_second_holder_waits_for_the_run_and_gives_up_after_the_bound(
    storage: SafepointCheckpointStorage, ledger: Ledger
) -> None:
    """While another live holder has the workflow's run, a journaled run waits (nothing sent);
    past ``wait`` it gives up with ``RunHeld``; once the holder lets go it runs."""
    run(CallJournal(storage), app.build(storage), ASKED)
    paid, store = ledger.model_calls(), storage.store
    other = store.hold_run(app.RUN_ID, holding.new_owner(), lease=30)  # another live holder
    with pytest.raises(RunHeld):
        run(CallJournal(storage, wait=0.2), app.build(storage), "refund order 2")
    assert ledger.model_calls() == paid
    seen: list[int] = []

    async def held_a_while() -> Any:
        async def let_go() -> None:
            await asyncio.sleep(0.3)
            seen.append(ledger.model_calls())  # the journaled run is still waiting
            store.release_hold(other)

        letting_go = asyncio.create_task(let_go())
        result = await CallJournal(storage, wait=30).run(app.build(storage), "refund order 2")
        await letting_go
        return result

    assert app.answer(asyncio.run(held_a_while())) == ANSWER
    assert seen == [paid]
    assert ledger.check_calls() == (8, 10)


def test_a_resume_from_an_older_checkpoint_is_a_branch_and_replays_nothing_into_it(
    storage: SafepointCheckpointStorage, ledger: Ledger
) -> None:
    """Resuming a finished run from the checkpoint before the auditor's superstep makes new
    calls under keys of their own: the old branch's responses at that place are not replayed."""
    run(CallJournal(storage), app.build(storage), ASKED)
    before = entries(storage)
    checkpoints = asyncio.run(storage.list_checkpoints(workflow_name=app.NAME))
    older = next(c for c in checkpoints if "clerk" in (c.messages or {}))  # the clerk's reply, undelivered
    journal = CallJournal(storage)
    assert app.answer(run(journal, app.build(storage), checkpoint_id=older.checkpoint_id)) == ANSWER
    turn = journal.last_turn
    assert turn is not None
    assert (turn.models.replayed, turn.models.called, turn.tools.replayed, turn.tools.called) == (0, 2, 0, 1)
    # The old branch recorded the auditor's calls at this very place: the root the checkpoint was
    # saved with, the superstep, the executor — a resume of it that was not a branch would replay.
    root = layout.live_in(storage.store.load(app.RUN_ID))[older.checkpoint_id].root
    old = [(json.loads(key.split("|", 1)[0])[0], *place(key)[:2]) for key in before]
    assert old.count((root, 2, "auditor")) == 3
    added = set(entries(storage)) - set(before)
    assert len(added) == 3
    assert all(
        json.loads(key.split("|", 1)[0])[0].startswith(older.checkpoint_id + "~branch:") for key in added
    )
    assert ledger.repeated_model_calls() == 2  # a branch is new work: the auditor asked again
    counters = storage.store.load(app.RUN_ID).counters
    assert (counters["model_calls"], counters["tool_calls"]) == (7, 5)


class CutOnce(app.Scripted):
    """A scripted model whose first request after a tool result raises ``Crash`` (once)."""

    cut = True

    async def _answer(self, messages: list[Any]) -> Any:
        if self.cut and any(c.type == "function_result" for m in messages for c in m.contents):
            CutOnce.cut = False
            raise Crash
        return await super()._answer(messages)


NOTES: list[str] = []


@tool
async def remember(text: str) -> str:
    """Keep a note (an idempotent effect, counted here)."""
    NOTES.append(text)
    return f"noted {len(text)} characters"


HOSTILE = "naïve \u202e\x1b[31m 🙂 \x07\t\n\x00 " + "ü" * 3000


def test_hostile_names_ids_and_arguments_are_keyed_and_replayed(storage: SafepointCheckpointStorage) -> None:
    """Control characters, bidi marks, NUL, emoji and very long strings in the workflow's name,
    an executor's id and a tool's arguments: recorded, keyed (long ids by digest), replayed."""
    name, executor = "flow\x00\u202e\r" + "é" * 2000, "scribe\x1f\u2028🙂" + "x" * 500
    CutOnce.cut = True
    NOTES.clear()

    def build() -> Any:
        model = CutOnce("scribe", [[("remember", {"text": HOSTILE})], "done"])
        agent = AgentExecutor(Agent(model, name="scribe", tools=[remember]), id=executor)
        builder = WorkflowBuilder(
            name=name, start_executor=agent, checkpoint_storage=storage, output_from=[agent]
        )
        return builder.build()

    with pytest.raises(Crash):
        run(CallJournal(storage), build(), HOSTILE)
    journal = CallJournal(storage)
    result = resume(journal, build(), storage)
    assert app.answer(result) == "done"
    turn = journal.last_turn
    assert turn is not None
    assert (turn.models.replayed, turn.models.called, turn.tools.replayed) == (1, 1, 1)
    assert NOTES == [HOSTILE]  # the tool ran once, with the arguments as given
    found = entries(storage, workflow_run_id(name))
    assert len(found) == 3
    marked = [e.key for e in storage.store.recorded_calls(workflow_run_id(name)) if resends.sent_key(e.key)]
    assert len(marked) == 1  # the model call cut in flight, re-sent: marked before it was sent again
    assert "|model#" in marked[0]
    assert resends.sent_key(marked[0]) in found
    for key in found:
        assert len(key) < 1024
        assert json.loads(key.split("|", 1)[0])[2].startswith("#")  # the long id, by its digest
        assert found[key].done


def test_streaming_is_refused_with_a_typed_error(storage: SafepointCheckpointStorage, ledger: Ledger) -> None:
    """A streamed run is not journaled: refused before anything runs, never half-recorded."""
    with pytest.raises(InvalidArgument, match="stream"):
        run(CallJournal(storage), app.build(storage), ASKED, stream=True)
    assert ledger.model_calls() == 0


def test_wrong_uses_are_refused_naming_what_is_wrong(
    storage: SafepointCheckpointStorage, ledger: Ledger, tmp_path: Path
) -> None:
    """Each wrong use is a SafepointError naming the mistake, never quoting the value given."""
    secret = "sk-do-not-print-me"
    wrongs: list[Any] = [
        lambda: CallJournal(f"sqlite:///{tmp_path / secret}"),  # type: ignore[arg-type]
        lambda: run(CallJournal(storage), secret),
        lambda: non_idempotent(secret),  # type: ignore[arg-type]
        lambda: run(
            CallJournal(storage), app.build(storage), ASKED, checkpoint_storage=InMemoryCheckpointStorage()
        ),
        lambda: run(CallJournal(storage), app.build(storage, name=""), ASKED),
    ]
    unnamed = app.build(storage)
    unnamed.name = f"WorkflowBuilder-{'1234abcd'}-1234-4321-abcd-0123456789ab"  # the builder's made-up name
    wrongs.append(lambda: run(CallJournal(storage), unnamed, ASKED))
    for wrong in wrongs:
        with pytest.raises(SafepointError) as refused:
            wrong()
        assert isinstance(refused.value, InvalidArgument)
        assert secret not in str(refused.value)
    with pytest.raises(CheckpointNotFound):  # a NotFound and the framework's own error alike
        run(CallJournal(storage), app.build(storage), checkpoint_id="no-such-checkpoint")
    assert ledger.model_calls() == 0
    assert storage.store.recorded_calls(app.RUN_ID) == []


def test_a_fresh_journal_on_a_reused_workflow_records_each_call_once(
    storage: SafepointCheckpointStorage, ledger: Ledger
) -> None:
    """``CallJournal(storage).run(workflow, …)`` on a long-lived workflow, a new journal each time:
    the middleware are installed once, so each request is recorded and counted once."""
    workflow = app.build(storage)
    for text in (ASKED, "refund order 2"):
        journal = CallJournal(storage)
        paid = ledger.model_calls()
        run(journal, workflow, text)
        turn = journal.last_turn
        assert turn is not None
        assert turn.models.called == ledger.model_calls() - paid
    agents = [e.agent for e in af_framework.agent_executors(workflow)]
    assert [len(a.middleware) for a in agents] == [3, 3]
    counters = storage.store.load(app.RUN_ID).counters
    assert (
        counters["model_calls"]
        == ledger.model_calls()
        == len([key for key in entries(storage) if "|model#" in key])
    )


def test_outside_a_journaled_run_the_middleware_change_nothing(
    storage: SafepointCheckpointStorage, ledger: Ledger
) -> None:
    """The journal installs its middleware once; a plain ``workflow.run`` of the same workflow
    afterwards records nothing and gives its tools no journal key."""
    workflow, journal = app.build(storage), CallJournal(storage)
    run(journal, workflow, ASKED)
    journal.install(workflow)
    agents = [e.agent for e in af_framework.agent_executors(workflow)]
    assert [sum(m in journal.middleware for m in a.middleware) for a in agents] == [3, 3]
    before, effects = entries(storage), len(ledger.calls())
    assert current_call_key() is None
    asyncio.run(workflow.run("refund order 2"))  # the same workflow again, not journaled
    assert entries(storage).keys() == before.keys()
    plain = ledger.calls()[effects:]
    assert any(e.kind == "model" for e in plain)
    assert all(not e.key.startswith('["') for e in plain if e.kind != "model")  # no journal key
