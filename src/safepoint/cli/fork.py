"""``safepoint fork``: go back to a step of a run and try again from there.

A fork is by reference (``Store.fork``): the new run's history starts with
the source's checkpoint at the fork step, its parent recorded; the source
is left as it was. An edit — a state change (``--set-state``) or a rewrite
of the last message's text (``--last-message``) — is saved as the fork's
next step, so the fork's history shows what was changed and the parent's
step is untouched.

``--requeue`` hands the fork to the workers. It is for runs a safepoint
``Run`` writes; a run an adapter wrote is resumed by its framework (a
worker's ``Run`` would not know its messages), so it is refused there with
a line saying so. A fork whose step is not running (done, failed, waiting,
cancelled) has nothing for a worker to do and is refused too: nothing is
written either way.
"""

from __future__ import annotations

from typing import Any

import click

from safepoint.cli.output import (
    ID_LEN,
    emit,
    handle_errors,
    open_existing,
    parse_json_option,
    say,
    store_options,
)
from safepoint.errors import RunStatusError
from safepoint.frameworks import ADAPTER_LABEL
from safepoint.model import Checkpoint, Status
from safepoint.visible import visible


def _id(run_id: str) -> str:
    return visible(run_id, max_len=ID_LEN)


@click.command()
@store_options
@click.argument("run_id")
@click.option("--step", type=int, default=None, help="The step to fork at (default: the latest).")
@click.option("--new-id", default=None, metavar="ID", help="The fork's run id (default: a new one).")
@click.option(
    "--set-state",
    "set_state",
    multiple=True,
    metavar="KEY=JSON",
    help="Edit: set the state's KEY to a JSON value, saved as the fork's next step (repeatable).",
)
@click.option(
    "--last-message",
    default=None,
    metavar="TEXT",
    help="Edit: rewrite the last message's text, saved as the fork's next step.",
)
@click.option("--requeue", is_flag=True, help="Queue the fork for workers (runs a safepoint Run writes).")
@handle_errors
def fork(
    *,
    store_url: str,
    as_json: bool,
    run_id: str,
    step: int | None,
    new_id: str | None,
    set_state: tuple[str, ...],
    last_message: str | None,
    requeue: bool,
) -> None:
    """Fork a run at a step (by reference: the source is untouched) and optionally edit and queue it.

    The fork starts with the source's checkpoint at --step, at the same step
    number. An edit (--set-state, --last-message) is saved as the fork's
    next step. --requeue queues the fork for workers: refused for a run an
    adapter wrote (its framework resumes it) and for a step that is not
    running.
    """
    changes = dict(_state_change(item) for item in set_state)
    with open_existing(store_url) as store:
        # Checked before anything is written: a refused fork leaves no run behind.
        source = store.load(run_id, step, migrate=False, fetch_blobs=last_message is not None)
        adapter = source.labels.get(ADAPTER_LABEL)
        if requeue:
            _check_requeue(source, adapter)
        if last_message is not None:
            _rewritten(source.messages, last_message)  # refuses a message without text to rewrite
        forked = store.fork(run_id, source.step, new_run_id=new_id)
        edited: int | None = None
        head = forked
        if changes or last_message is not None:
            head = forked.next()
            head.state = {**head.state, **changes}
            if last_message is not None:
                head.messages = _rewritten(list(head.messages), last_message)
            store.save(head)
            edited = head.step
        if requeue:
            store.enqueue(forked.run_id)
    data: dict[str, Any] = {
        "run_id": forked.run_id,
        "parent": {"run_id": run_id, "step": source.step},
        "head_step": head.step,
        "status": head.status.value,
        "edited_step": edited,
        "edited": {"state": sorted(changes), "last_message": last_message is not None},
        "queued": requeue,
        "adapter": adapter,
    }

    def render() -> None:
        say(f"forked run {_id(run_id)} at step {source.step} as {_id(forked.run_id)}")
        if edited is not None:
            what = [f"state {', '.join(visible(k, max_len=40) for k in sorted(changes))}"] if changes else []
            what += ["the last message"] if last_message is not None else []
            say(f"  the edit ({' and '.join(what)}) is its step {edited}")
        if requeue:
            say("  queued: a worker will resume it")
        elif adapter is not None:
            say(f"  written by the {visible(adapter, max_len=40)} adapter: resume it through its framework")
        elif head.status is Status.RUNNING:
            say("  resume it with Run.resume, or queue it for workers: safepoint requeue")

    emit(data, as_json, render)


def _state_change(item: str) -> tuple[str, Any]:
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise click.BadParameter("takes KEY=JSON", param_hint="--set-state")
    return key, parse_json_option(text, "--set-state")


def _check_requeue(source: Checkpoint, adapter: str | None) -> None:
    if adapter is not None:
        raise click.UsageError(
            f"--requeue is for runs a safepoint Run writes; this run was written by the "
            f"{visible(adapter, max_len=40)} adapter, whose framework resumes it: fork without --requeue "
            "and resume the fork there"
        )
    if source.status is not Status.RUNNING:
        raise RunStatusError(
            source.run_id,
            source.status.value,
            f"at step {source.step}, so a fork of it has nothing for a worker to run: "
            "fork at an earlier step, or without --requeue",
        )


def _rewritten(messages: list[Any], text: str) -> list[Any]:
    """``messages`` with the last one's text replaced; a message without text content is refused."""
    if not messages:
        raise click.UsageError("--last-message: the step has no messages")
    last = messages[-1]
    if not isinstance(last, dict) or not isinstance(last.get("content"), str):
        raise click.UsageError(
            "--last-message: the last message has no text content to rewrite (edit the state instead)"
        )
    return [*messages[:-1], {**last, "content": text}]
