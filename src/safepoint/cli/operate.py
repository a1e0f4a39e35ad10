"""``safepoint answer``, ``cancel``, ``requeue``, ``delete`` and ``budget``: commands for operators.

Each is a thin layer over the public API. ``cancel``, ``requeue`` and
``delete`` are store methods (``Store.cancel``, ``Store.requeue``,
``Store.delete_run``). ``answer`` and ``budget`` act on the harness's
conventions — the waiting question, the budget counters — which the store
does not know, so they go through ``Run.resume_with`` and ``Run.set_budget``:
one new checkpoint each.

Workers: a run a worker holds a live lease on may be being worked on right
now. ``cancel`` fences that worker off (its next save raises ``LeaseLost``);
``answer`` and ``budget`` refuse (exit code 6, conflict) unless ``--force``,
which fences it off first. A run that workers serve (it was ever claimed)
and that the change makes runnable goes back in the queue. Taking a run
from the workers and handing it back is ``safepoint.handover``, which the
inspector's answer uses too.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from safepoint import Reconcile, Run
from safepoint.cli.output import (
    ID_LEN,
    emit,
    handle_errors,
    number,
    open_existing,
    parse_json_option,
    say,
    store_options,
)
from safepoint.errors import RunStatusError
from safepoint.handover import answer_waiting, back_to_workers, to_ourselves
from safepoint.model import Status
from safepoint.visible import visible

# Runs a requeue refuses: nothing is left for a worker to run (the store would queue them as they are).
_OVER = frozenset({Status.DONE, Status.CANCELLED})
_FORCE_HELP = "Fence off a worker holding the run's lease first (its next save fails with LeaseLost)."


def _id(run_id: str) -> str:
    return visible(run_id, max_len=ID_LEN)


@click.command()
@store_options
@click.argument("run_id")
@click.argument("value", required=False)
@click.option("--json-value", metavar="JSON", help="The answer as a JSON value instead of text.")
@click.option("--rerun", is_flag=True, help="A run waiting on an interrupted action: take the action again.")
@click.option(
    "--skip", is_flag=True, help="A run waiting on an interrupted action: it happened, VALUE is its result."
)
@click.option("--force", is_flag=True, help=_FORCE_HELP)
@handle_errors
def answer(
    *,
    store_url: str,
    as_json: bool,
    run_id: str,
    value: str | None,
    json_value: str | None,
    rerun: bool,
    skip: bool,
    force: bool,
) -> None:
    """Answer a run waiting for human input, and resume it (as Run.resume_with does).

    VALUE is the answer as text (or --json-value for any JSON value). A run
    waiting on an action its crash interrupted takes --rerun, or --skip with
    the action's result as the value. The answer is saved as the run's next
    checkpoint; a run that workers serve goes back in their queue.
    """
    if value is not None and json_value is not None:
        raise click.UsageError("give the answer as VALUE or --json-value, not both")
    if rerun and skip:
        raise click.UsageError("--rerun and --skip exclude each other")
    if rerun:
        if value is not None or json_value is not None:
            raise click.UsageError("--rerun takes no value")
        reply: Any = Reconcile.rerun()
    elif value is None and json_value is None:
        raise click.UsageError("give the answer: VALUE, or --json-value JSON")
    else:
        given = parse_json_option(json_value, "--json-value") if json_value is not None else value
        reply = Reconcile.skip(given) if skip else given
    with open_existing(store_url) as store:
        run, state, queued = answer_waiting(store, run_id, reply, force=force)
    data = {
        "run_id": run_id,
        "step": run.step,
        "status": run.status.value,
        "queued": queued,
        "fenced": state.leased(),
    }

    def render() -> None:
        say(f"answered run {_id(run_id)}: saved as step {run.step}; it is {run.status.value}")
        if state.leased():
            say("the worker that held its lease was fenced off")
        if queued:
            say("back in the queue: a worker will resume it")
        elif run.status is Status.RUNNING:
            say("resume it where it runs (Run.resume), or queue it for workers: safepoint requeue")

    emit(data, as_json, render)


@click.command()
@store_options
@click.argument("run_id")
@handle_errors
def cancel(*, store_url: str, as_json: bool, run_id: str) -> None:
    """Stop a run for good: status cancelled, out of the queue.

    A worker holding its lease is fenced off: its next save fails (LeaseLost)
    and changes nothing. The cancellation is saved as the run's next
    checkpoint, so it shows in the history. A done run cannot be cancelled.
    """
    with open_existing(store_url) as store:
        done = store.cancel(run_id)
    data = {"run_id": run_id, "step": done.step, "fenced": done.fenced}

    def render() -> None:
        saved = "" if done.step is None else f" (saved as step {done.step})"
        say(f"cancelled run {_id(run_id)}{saved}")
        if done.fenced:
            say("the worker that held its lease was fenced off: its next save fails")

    emit(data, as_json, render)


@click.command()
@store_options
@click.argument("run_id")
@handle_errors
def requeue(*, store_url: str, as_json: bool, run_id: str) -> None:
    """Put a run back in the workers' queue with its attempts reset.

    For a run a worker quarantined (failed after its attempts, its last error
    shown by safepoint runs): it becomes running and claimable again. A done
    or cancelled run is refused (exit 6): it has nothing left to run; to try
    again from one of its steps, fork it (safepoint fork --requeue).
    """
    with open_existing(store_url) as store:
        status = store.run(run_id).status
        if status in _OVER:
            raise RunStatusError(
                run_id,
                status.value,
                "a worker would have nothing to run: to try again from one of its steps, "
                "fork it there (safepoint fork RUN_ID --step N --requeue)",
            )
        store.requeue(run_id)
        info = store.run(run_id)
    data = {"run_id": run_id, "status": info.status.value, "queued": True}
    emit(
        data,
        as_json,
        lambda: say(f"requeued run {_id(run_id)}: it is {info.status.value}, and a worker will claim it"),
    )


@click.command()
@store_options
@click.argument("run_id")
@click.option("--yes", is_flag=True, help="Delete without asking.")
@handle_errors
def delete(*, store_url: str, as_json: bool, run_id: str, yes: bool) -> None:
    """Delete a run: every checkpoint, its messages, its place in the queue.

    Asks first unless --yes. A worker holding its lease is fenced off. The
    blobs only this run referenced go at the next safepoint gc.
    """
    with open_existing(store_url) as store:
        steps = len(store.history(run_id))
        leased = store.queue_state(run_id).leased()
        if not yes:
            if not sys.stdin.isatty():
                raise click.UsageError("not deleting without a confirmation: pass --yes")
            worker = " A worker holds its lease; it will be fenced off." if leased else ""
            click.confirm(
                f"Delete run {_id(run_id)} and its {steps} checkpoints?{worker}", abort=True, err=True
            )
        store.delete_run(run_id)
    data = {"run_id": run_id, "checkpoints": steps, "fenced": leased}

    def render() -> None:
        say(f"deleted run {_id(run_id)} and its {steps} checkpoints; its blobs go at the next safepoint gc")

    emit(data, as_json, render)


@click.command()
@store_options
@click.argument("run_id")
@click.option("--tokens", type=click.IntRange(min=0), default=None, help="Set the tokens limit (in + out).")
@click.option("--spend", type=click.FloatRange(min=0), default=None, help="Set the spend limit.")
@click.option("--steps", type=click.IntRange(min=0), default=None, help="Set the steps limit.")
@click.option("--force", is_flag=True, help=_FORCE_HELP)
@handle_errors
def budget(
    *,
    store_url: str,
    as_json: bool,
    run_id: str,
    tokens: int | None,
    spend: float | None,
    steps: int | None,
    force: bool,
) -> None:
    """Set a run's budget limits (those given; the others stay), as one new checkpoint.

    --tokens N sets the limit to N. A run that its budget stopped becomes
    runnable again once the new limits cover what it used (a run that
    workers serve goes back in their queue).
    """
    if tokens is None and spend is None and steps is None:
        raise click.UsageError("give at least one of --tokens, --spend, --steps")
    with open_existing(store_url) as store:
        with to_ourselves(store, run_id, force) as state:
            run = Run.set_budget(store, run_id, tokens=tokens, spend=spend, steps=steps)
        queued = back_to_workers(store, state, run)
    limits, left = run.budget, run.remaining
    data = {
        "run_id": run_id,
        "step": run.step,
        "status": run.status.value,
        "budget": {"tokens": limits.tokens, "spend": limits.spend, "steps": limits.steps},
        "remaining": {"tokens": left.tokens, "spend": left.spend, "steps": left.steps},
        "queued": queued,
        "fenced": state.leased(),
    }

    def render() -> None:
        say(f"budget of run {_id(run_id)} saved as step {run.step}; it is {run.status.value}")
        for name in ("tokens", "spend", "steps"):
            limit = getattr(limits, name)
            if limit is not None:
                say(f"  {name}: limit {number(limit)}, {number(getattr(left, name))} left")
        if run.status is Status.FAILED:
            say("still over a limit: it stays failed")
        if queued:
            say("back in the queue: a worker will resume it")

    emit(data, as_json, render)
