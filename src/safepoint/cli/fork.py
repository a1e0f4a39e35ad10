"""``safepoint fork``: go back to a step of a run and try again from there.

The fork, its edit and the requeue refusals are ``safepoint.edited_fork``'s,
which the inspector's fork form uses too; this command parses the options
and says what was made. A fork is by reference: the source is left as it
was, and an edit (``--set-state``, ``--last-message``) is the fork's next
step. ``--requeue`` is for runs a safepoint ``Run`` writes, on a running
step; a run an adapter wrote is resumed by its framework. A refused fork
writes nothing.
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
from safepoint.edited_fork import Edit, fork_with_edit
from safepoint.model import Status
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
        made = fork_with_edit(
            store, run_id, step, new_run_id=new_id, edit=Edit(changes, last_message), requeue=requeue
        )
    source, head, edited, adapter = made.source, made.head, made.edited_step, made.adapter
    data: dict[str, Any] = {
        "run_id": made.run_id,
        "parent": {"run_id": run_id, "step": source.step},
        "head_step": head.step,
        "status": head.status.value,
        "edited_step": edited,
        "edited": {"state": sorted(changes), "last_message": last_message is not None},
        "queued": requeue,
        "adapter": adapter,
    }

    def render() -> None:
        say(f"forked run {_id(run_id)} at step {source.step} as {_id(made.run_id)}")
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
