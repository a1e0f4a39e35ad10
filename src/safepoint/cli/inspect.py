"""``safepoint show``, ``history`` and ``diff``: one run's checkpoints as stored (any version, unmigrated)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.table import Table
from rich.text import Text

from safepoint.cli.messages import reader
from safepoint.cli.output import (
    ID_LEN,
    NARROW,
    WIDE,
    cell,
    console,
    emit,
    handle_errors,
    numbers,
    open_store_at,
    pairs,
    say,
    shown,
    store_options,
    when,
)
from safepoint.errors import NotFound, SafepointError
from safepoint.frameworks import framework_view
from safepoint.model import VALUE_FIELDS, Checkpoint
from safepoint.readable import checkpoint_diff, pending
from safepoint.step_calls import PARENT, ShownCall, history_calls, step_calls
from safepoint.store import RedactionRecord, Store
from safepoint.visible import visible

T = TypeVar("T")

# How much of a changed value or an added message one line shows.
_VALUE_LEN = 60
_MESSAGE_LEN = 90


@click.command()
@store_options
@click.argument("run_id")
@click.option("--step", type=int, default=None, help="Show this step instead of the latest.")
@click.option(
    "--messages", "show_messages", default=10, show_default=True, help="How many recent messages to show."
)
@handle_errors
def show(*, store_url: str, as_json: bool, run_id: str, step: int | None, show_messages: int) -> None:
    """Show one checkpoint of a run (the latest unless --step), with the calls it recorded."""
    with open_store_at(store_url, read_only=True) as store:
        cp = store.load(run_id, step, migrate=False)  # as stored: a checkpoint of any version shows
        steps = len(store.history(run_id))
        calls = _calls(lambda: step_calls(store, run_id, cp.step, **_lineage(store, run_id)))
        redactions = store.redactions(run_id)

    def render() -> None:
        _render_checkpoint(cp, steps, show_messages)
        _render_calls(f"recorded calls of step {cp.step}", calls, with_result=True)
        _render_redactions(redactions)

    data = cp.to_dict()
    data["scrub_report"] = [
        {"rule": rule, "path": path, "count": count} for rule, path, count in cp.scrub_report.counts
    ]
    data["calls"] = _calls_json(calls, with_result=True)
    data["redactions"] = [_redaction_json(record) for record in redactions]
    emit(data, as_json, render)


def _redaction_json(record: RedactionRecord) -> dict[str, Any]:
    return {
        "redaction_id": record.redaction_id,
        "at": record.at.isoformat(),
        "named": record.named,
        "counts": record.counts,
        "steps": {str(step): count for step, count in sorted(record.steps.items())},
        "intact": record.intact,
    }


def _render_redactions(records: list[RedactionRecord]) -> None:
    """The run's audited redactions: what each named and replaced where, never a value."""
    if not records:
        return
    table = Table(title=Text("audited redactions (history rewritten on purpose)"))
    for column in ("when", "named", "replaced", "in steps", "record"):
        table.add_column(column)
    for record in records:
        steps = ", ".join(str(step) for step in sorted(record.steps)) or "-"
        table.add_row(
            when(record.at), cell(record.named_text(), max_len=_VALUE_LEN), str(record.found),
            cell(steps, max_len=_VALUE_LEN), "intact" if record.intact else "EDITED: safepoint verify fails",
        )  # fmt: skip
    console.print(table)


def _lineage(store: Store, run_id: str) -> dict[str, Any]:
    info = store.run(run_id)
    return {"head_step": info.head_step, "parent": info.parent}


def _calls(read: Callable[[], T]) -> T | str:
    """What ``read`` returns, or the class of the error that made the run's journal unreadable."""
    try:
        return read()
    except NotFound:
        raise
    except SafepointError as exc:  # a damaged entry: safepoint verify names it
        return type(exc).__name__


def _calls_json(calls: list[ShownCall] | str, *, with_result: bool) -> Any:
    if isinstance(calls, str):
        return {"unreadable": calls}
    return [call.as_json(with_result=with_result) for call in calls]


def _render_calls(title: str, calls: list[ShownCall] | str, *, with_result: bool) -> None:
    if isinstance(calls, str):
        say(f"{title}: unreadable ({calls}; safepoint verify names the entry)")
        return
    if not calls:
        return
    table = Table(title=Text(title))
    for column in ("step", "key", "state", "recorded", "usage", *(("result",) if with_result else ()), "of"):
        table.add_column(column)
    for call in calls:
        entry = call.entry
        whose = call.whose_text
        if call.whose == PARENT:
            whose = f"parent {visible(entry.run_id, max_len=ID_LEN)}"
        result = (cell(entry.result, max_len=_VALUE_LEN),) if with_result else ()
        table.add_row(
            str(entry.step), cell(entry.key, max_len=_VALUE_LEN), cell(entry.state),
            call.recorded_text, cell(call.usage_text), *result, Text(whose),
        )  # fmt: skip
    console.print(table)


def _render_checkpoint(cp: Checkpoint, steps: int, show_messages: int) -> None:
    summary = Table(
        title=Text(f"run {visible(cp.run_id, max_len=ID_LEN)} · step {cp.step}"), show_header=False
    )
    summary.add_column("field", style="bold")
    summary.add_column("value")
    parent = cp.parent
    view = framework_view(cp.labels, cp.state)
    # A run an adapter wrote leads with what its framework calls it: thread, checkpoint, channels.
    rows = [] if view is None else [("framework", view.framework)]
    if view is not None:
        rows += [(name, visible(value, max_len=WIDE)) for name, value in view.facts]
        rows += [(f"channel {visible(name)}", visible(text, max_len=WIDE)) for name, text in view.channels]
    rows += [
        ("status", shown(cp.status.value)),
        ("schema_version", shown(cp.schema_version)),
        ("saved", when(cp.created_at)),
        ("checkpoints", str(steps)),
        ("messages", str(len(cp.messages))),
        ("counters", numbers(cp.counters, max_len=WIDE)),
        *((name, _value_shown(name, getattr(cp, name))) for name in VALUE_FIELDS),
        ("labels", pairs(cp.labels, max_len=WIDE)),
        ("parent", "-" if parent is None else f"{visible(parent.run_id, max_len=ID_LEN)} step {parent.step}"),
        ("digest", shown(cp.digest or "-")),
        ("scrubbed", _scrubbed(cp)),
    ]
    for field, value in rows:
        summary.add_row(field, Text(value))
    console.print(summary)
    recent = list(enumerate(cp.messages))[-show_messages:] if show_messages > 0 else []
    if recent:
        table = Table(title=Text(f"last {len(recent)} of {len(cp.messages)} messages"))
        table.add_column("#", justify="right")
        table.add_column("role")
        table.add_column("content")
        describe = reader(cp.labels)
        for index, message in recent:
            # One row per message, tool calls and results included: a line break shows as \n.
            role, text = describe(message)
            table.add_row(str(index), cell(role, max_len=NARROW), cell(text, max_len=NARROW))
        console.print(table)


def _scrubbed(cp: Checkpoint) -> str:
    """What the scrubber replaced when this checkpoint was saved: counts by rule, never values."""
    counts = cp.scrub_report.by_rule()
    return ", ".join(f"{shown(rule)} x{n}" for rule, n in counts.items()) or "nothing"


@click.command()
@store_options
@click.argument("run_id")
@handle_errors
def history(*, store_url: str, as_json: bool, run_id: str) -> None:
    """List every checkpoint of a run, oldest first, with the action each one had pending
    and the calls each one recorded (a fork: its parent's up to the fork step)."""
    with open_store_at(store_url, read_only=True) as store:
        infos = store.history(run_id)
        actions = {i.step: _pending_at(store, run_id, i.step) for i in infos}
        steps = [i.step for i in infos]
        settled = _settled(actions, steps)
        calls = _calls(lambda: history_calls(store, run_id, steps, **_lineage(store, run_id)))
    data = [
        {
            "step": i.step,
            "status": i.status.value,
            "schema_version": i.schema_version,
            "messages": i.message_count,
            "created_at": i.created_at.isoformat(),
            "digest": i.digest,
            "pending_action": actions[i.step],
            "pending_until": settled.get(i.step),
            "calls": _calls_json(calls if isinstance(calls, str) else calls[i.step], with_result=False),
        }
        for i in infos
    ]

    def render() -> None:
        table = Table(title=Text(f"history of {visible(run_id, max_len=ID_LEN)} ({len(infos)} checkpoints)"))
        for column in ("step", "status", "version", "messages", "saved", "digest", "pending action"):
            table.add_column(column)
        for i in infos:
            action = _pending_shown(actions[i.step], settled.get(i.step))
            table.add_row(
                str(i.step), cell(i.status.value), cell(i.schema_version), str(i.message_count),
                when(i.created_at), cell(i.digest[:16]), cell(action, max_len=_MESSAGE_LEN),
            )  # fmt: skip
        console.print(table)
        listed = calls if isinstance(calls, str) else [call for step in steps for call in calls[step]]
        _render_calls("recorded calls", listed, with_result=False)

    emit(data, as_json, render)


def _settled(actions: dict[int, Any], steps: list[int]) -> dict[int, int]:
    """For each step whose action was pending, the first later step where it no longer is (by key).

    An action is saved pending before its side effect, so every step that
    took one shows it; a later checkpoint without it (or with another)
    means the action came back — done, or failed in plain sight.
    """
    until: dict[int, int] = {}
    for index, step in enumerate(steps):
        key = _action_key(actions[step])
        if key is None:
            continue
        for later in steps[index + 1 :]:
            if _action_key(actions[later]) != key:
                until[step] = later
                break
    return until


def _action_key(action: Any) -> Any:
    if isinstance(action, dict) and action.get("kind") == "action":
        return action.get("key") or json.dumps(action, sort_keys=True, default=str)
    return None


_IN_FLIGHT = " · in flight"  # how readable.pending ends an action that has neither answer nor question


def _pending_shown(action: Any, until: int | None) -> str:
    """The pending action in one line; one that a later step no longer has is no longer in flight."""
    text = pending(action)
    if until is not None and text.endswith(_IN_FLIGHT):
        return f"{text.removesuffix(_IN_FLIGHT)} · finished by step {until}"
    return text


def _pending_at(store: Store, run_id: str, step: int) -> Any:
    """The pending action of one step (a load, blobs left in the store); an unreadable step says so."""
    try:
        return store.load(run_id, step, migrate=False, fetch_blobs=False).pending_action
    except NotFound:
        return None  # pruned since it was listed
    except SafepointError as exc:
        return {"unreadable": type(exc).__name__}


@click.command()
@store_options
@click.argument("run_id")
@click.argument("step_a", type=int)
@click.argument("step_b", type=int, required=False)
@handle_errors
def diff(*, store_url: str, as_json: bool, run_id: str, step_a: int, step_b: int | None) -> None:
    """What changed between two checkpoints of a run (STEP_B: the latest by default)."""
    with open_store_at(store_url, read_only=True) as store:
        # As stored: checkpoints of any schema_version compare, unmigrated.
        a = store.load(run_id, step_a, migrate=False)
        b = store.load(run_id, step_b, migrate=False)
    data = checkpoint_diff(a, b)

    def render() -> None:
        moved = data["messages"]
        say(
            f"run {visible(run_id, max_len=ID_LEN)}: step {a.step} → step {b.step}: "
            f"{moved['shared']} messages shared, {moved['removed']} removed, {len(moved['added'])} added"
        )
        table = Table(show_header=True)
        for column in ("field", "step " + str(a.step), "step " + str(b.step)):
            table.add_column(column)
        for change in data["fields"]:
            # Values as JSON (a string in quotes), so "1" and 1, or "" and null, differ.
            table.add_row(
                cell(change["path"], max_len=_VALUE_LEN),
                Text(visible(_json(change["before"]), max_len=_VALUE_LEN)),
                Text(visible(_json(change["after"]), max_len=_VALUE_LEN)),
            )
        console.print(table)
        describe = reader(b.labels)  # an adapter's run in its framework's terms
        for message in moved["added"][-10:]:
            role, text = describe(message)  # tool calls and results too
            say(f"  + {shown(role, max_len=_VALUE_LEN)}: {shown(text, max_len=_MESSAGE_LEN)}")

    emit(data, as_json, render)


def _value_shown(name: str, value: Any) -> str:
    # The pending action may be one of the harness's shapes, shown as one line;
    # every other value field (and any other pending action) as JSON.
    if name == "pending_action":
        return visible(pending(value), max_len=WIDE)
    return shown(value, max_len=WIDE)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
