"""``safepoint history``, ``diff``, ``verify`` and ``import``: looking into a store, and back in."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from safepoint.cli import _open, handle_errors, main, store_options
from safepoint.cli_messages import describe, pending
from safepoint.cli_migrations import load_chain, migrations_option
from safepoint.cli_render import ID_LEN, cell, console, emit, say, shown, when
from safepoint.errors import Conflict, CorruptCheckpoint, NotFound, SafepointError
from safepoint.messagelist import thaw
from safepoint.model import Checkpoint
from safepoint.store import Store
from safepoint.store.admin import all_runs
from safepoint.tamper import checkpoint_mismatches, run_mismatches
from safepoint.testing.migrations import fixture_checkpoint, read_fixture
from safepoint.visible import visible

# How much of a changed value or an added message one line shows.
_VALUE_LEN = 60
_MESSAGE_LEN = 90


@main.command()
@store_options
@click.argument("run_id")
@handle_errors
def history(*, store_url: str, as_json: bool, run_id: str) -> None:
    """List every checkpoint of a run, oldest first, with the action each one had pending."""
    with _open(store_url, read_only=True) as store:
        infos = store.history(run_id)
        actions = {i.step: _pending_at(store, run_id, i.step) for i in infos}
    data = [
        {
            "step": i.step,
            "status": i.status.value,
            "schema_version": i.schema_version,
            "messages": i.message_count,
            "created_at": i.created_at.isoformat(),
            "digest": i.digest,
            "pending_action": actions[i.step],
        }
        for i in infos
    ]

    def render() -> None:
        table = Table(title=Text(f"history of {visible(run_id, max_len=ID_LEN)} ({len(infos)} checkpoints)"))
        for column in ("step", "status", "version", "messages", "saved", "digest", "pending action"):
            table.add_column(column)
        for i in infos:
            table.add_row(
                str(i.step), cell(i.status.value), cell(i.schema_version), str(i.message_count),
                when(i.created_at), cell(i.digest[:16]), cell(pending(actions[i.step]), max_len=_MESSAGE_LEN),
            )  # fmt: skip
        console.print(table)

    emit(data, as_json, render)


def _pending_at(store: Store, run_id: str, step: int) -> Any:
    """The pending action of one step (a load, blobs left in the store); an unreadable step says so."""
    try:
        return store.load(run_id, step, migrate=False, fetch_blobs=False).pending_action
    except NotFound:
        return None  # pruned since it was listed
    except SafepointError as exc:
        return {"unreadable": type(exc).__name__}


@main.command()
@store_options
@click.argument("run_id")
@click.argument("step_a", type=int)
@click.argument("step_b", type=int, required=False)
@handle_errors
def diff(*, store_url: str, as_json: bool, run_id: str, step_a: int, step_b: int | None) -> None:
    """What changed between two checkpoints of a run (STEP_B: the latest by default)."""
    with _open(store_url, read_only=True) as store:
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
        for message in moved["added"][-10:]:
            role, text = describe(message)  # tool calls and results too
            say(f"  + {shown(role, max_len=_VALUE_LEN)}: {shown(text, max_len=_MESSAGE_LEN)}")

    emit(data, as_json, render)


def checkpoint_diff(a: Checkpoint, b: Checkpoint) -> dict[str, Any]:
    """The differences between two checkpoints: messages shared/removed/added, changed fields by path."""
    old, new = list(a.messages), list(b.messages)
    shared = 0
    while shared < min(len(old), len(new)) and old[shared] == new[shared]:
        shared += 1
    changes: list[dict[str, Any]] = []
    left, right = a.to_dict(), b.to_dict()
    for name in ("status", "schema_version", "counters", "cursors", "state", "pending_action", "labels"):
        _field_changes(name, left[name], right[name], changes)
    return {
        "run_id": b.run_id,
        "from_step": a.step,
        "to_step": b.step,
        "messages": {"shared": shared, "removed": len(old) - shared, "added": thaw(new[shared:])},
        "fields": changes,
    }


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _field_changes(path: str, before: Any, after: Any, out: list[dict[str, Any]]) -> None:
    if before == after:
        return
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after)):
            _field_changes(f"{path}.{key}", before.get(key), after.get(key), out)
        return
    out.append({"path": path, "before": before, "after": after})


@main.command()
@store_options
@click.argument("run_id", required=False)
@handle_errors
def verify(*, store_url: str, as_json: bool, run_id: str | None) -> None:
    """Load and verify every checkpoint (of one run, or all): digests, messages, blobs,
    the listed columns outside the digest, and each run's head.

    Exits non-zero if any fails, naming run, step and what is wrong.
    """
    failures: list[dict[str, Any]] = []
    checked = 0

    def failed(rid: str, step: int | None, exc: SafepointError) -> None:
        failure = {"run_id": rid, "step": step, "error": type(exc).__name__, "message": str(exc)}
        if failure not in failures:  # a damaged head fails its own load and the head's
            failures.append(failure)

    with _open(store_url, read_only=True) as store:
        runs = [run_id] if run_id else [run.run_id for run in all_runs(store)]
        keys = []
        for rid in runs:
            try:
                keys += [(rid, info) for info in store.history(rid)]
            except NotFound:
                if run_id:
                    raise
                continue  # deleted meanwhile
            except SafepointError as exc:  # a damaged history row
                failed(rid, getattr(exc, "step", None), exc)
        firsts: dict[str, Checkpoint] = {}  # each run's oldest stored checkpoint: its parent
        with Progress(console=console, disable=as_json) as bar:
            for rid, info in bar.track(keys, description="verifying checkpoints"):
                try:
                    cp = store.load(rid, info.step, migrate=False)  # digests, messages, blobs: any version
                    firsts.setdefault(rid, cp)  # history is oldest first
                    _agree(rid, info.step, checkpoint_mismatches(info, cp), "checkpoint row")
                except NotFound:
                    continue  # deleted meanwhile
                except SafepointError as exc:
                    failed(rid, info.step, exc)
                checked += 1
        for rid in runs:  # the head as a load finds it, and the run row against it
            try:
                for step in store.hidden_steps(rid):  # a live checkpoint flagged pruned by hand
                    hidden = CorruptCheckpoint(rid, step, "marked pruned but still holds a checkpoint")
                    failed(rid, step, hidden)
                head = store.load(rid, migrate=False, fetch_blobs=False)
                _agree(rid, head.step, run_mismatches(store.run(rid), head, firsts.get(rid)), "run row")
            except NotFound:
                continue
            except SafepointError as exc:
                failed(rid, getattr(exc, "step", None), exc)
    data = {"checked": checked, "failures": failures}

    def render() -> None:
        say(f"verified {checked} checkpoints: {len(failures)} failed")
        for failure in failures:
            say(f"  {failure['error']}: {visible(failure['message'])}")

    emit(data, as_json, render)
    if failures:
        sys.exit(1)


def _agree(run_id: str, step: int, mismatched: list[str], row: str) -> None:
    if mismatched:
        raise CorruptCheckpoint(
            run_id, step, f"the {row}'s {', '.join(mismatched)} disagree with the checkpoint"
        )


@main.command(name="import")
@store_options
@click.argument("fixture", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--run-id", default=None, help="The new run's id (default: the exported run's id).")
@migrations_option
@click.option(
    "--schema-version",
    type=int,
    default=None,
    help="The current schema_version of the code that will resume it (default: the chain's, else 1).",
)
@handle_errors
def import_(
    *,
    store_url: str,
    as_json: bool,
    fixture: Path,
    run_id: str | None,
    chain_spec: str | None,
    schema_version: int | None,
) -> None:
    """Start a new run from an exported checkpoint (``safepoint export``), as its step 0.

    Reproduce a production run locally: export it there, import it here, resume it.
    A fixture newer than schema_version 1 needs the chain it was written for
    (``--migrations``) or ``--schema-version``.
    """
    cp = fixture_checkpoint(read_fixture(fixture), run_id)
    options: dict[str, Any] = {"schema_version": schema_version}
    if chain_spec:
        options["migrations"] = load_chain(chain_spec)
    with _open(store_url, **options) as store:
        try:
            info = store.save(cp)
        except Conflict as exc:
            if exc.head is None:
                raise
            raise Conflict(
                cp.run_id,
                cp.step,
                exc.head,
                detail=f"run {cp.run_id!r} already exists (at step {exc.head}); "
                "import the fixture as a new run with --run-id NEW_ID",
            ) from None
    emit(
        {"run_id": info.run_id, "step": info.step, "messages": info.message_count, "digest": info.digest},
        as_json,
        lambda: say(f"imported {visible(str(fixture))} as run {visible(info.run_id, max_len=ID_LEN)} step 0"),
    )
