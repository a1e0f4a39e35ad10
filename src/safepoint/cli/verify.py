"""``safepoint verify``: every stored checkpoint loaded and checked, and each run's row against them."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click
from rich.progress import Progress

from safepoint.cli.output import console, emit, handle_errors, open_store_at, say, store_options
from safepoint.errors import CorruptCheckpoint, NotFound, SafepointError
from safepoint.model import Checkpoint
from safepoint.store import Store
from safepoint.store.admin import all_runs
from safepoint.tamper import checkpoint_mismatches, run_mismatches
from safepoint.visible import visible


@click.command()
@store_options
@click.argument("run_id", required=False)
@handle_errors
def verify(*, store_url: str, as_json: bool, run_id: str | None) -> None:
    """Load and verify every checkpoint (of one run, or all): digests, messages, blobs,
    the listed columns outside the digest, each run's head, and its recorded calls.

    Exits non-zero if any fails, naming run, step and what is wrong.
    """
    failures: list[dict[str, Any]] = []
    checked = calls = 0

    def failed(rid: str, step: int | None, exc: SafepointError) -> None:
        failure = {"run_id": rid, "step": step, "error": type(exc).__name__, "message": str(exc)}
        if failure not in failures:  # a damaged head fails its own load and the head's
            failures.append(failure)

    with open_store_at(store_url, read_only=True) as store:
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
        for rid in runs:  # the head as a load finds it, the run row against it, the journal
            calls += _verify_run(store, rid, firsts.get(rid), failed)
    data = {"checked": checked, "calls": calls, "failures": failures}

    def render() -> None:
        say(f"verified {checked} checkpoints and {calls} recorded calls: {len(failures)} failed")
        for failure in failures:
            say(f"  {failure['error']}: {visible(failure['message'])}")

    emit(data, as_json, render)
    if failures:
        sys.exit(1)


Failed = Callable[[str, int | None, SafepointError], None]  # where, at which step, what


def _verify_run(store: Store, run_id: str, first: Checkpoint | None, failed: Failed) -> int:
    """Check the run's head and row, then its call journal (each entry's result against its
    digest, or its seal): how many entries were checked; what is wrong goes to ``failed``."""
    try:
        for step in store.hidden_steps(run_id):  # a live checkpoint flagged pruned by hand
            hidden = CorruptCheckpoint(run_id, step, "marked pruned but still holds a checkpoint")
            failed(run_id, step, hidden)
        head = store.load(run_id, migrate=False, fetch_blobs=False)
        origin = store.status_origin(run_id)
        mismatched = run_mismatches(store.run(run_id), head, first, origin)
        _agree(run_id, head.step, mismatched, "run row")
    except NotFound:
        return 0  # deleted meanwhile
    except SafepointError as exc:
        failed(run_id, getattr(exc, "step", None), exc)
    try:
        journal = store.verify_calls(run_id)
    except NotFound:
        return 0
    except SafepointError as exc:
        failed(run_id, None, exc)
        return 0
    for damaged in journal.damaged:
        failed(run_id, damaged.step, damaged)
    return journal.checked


def _agree(run_id: str, step: int, mismatched: list[str], row: str) -> None:
    if mismatched:
        raise CorruptCheckpoint(
            run_id, step, f"the {row}'s {', '.join(mismatched)} disagree with the checkpoint"
        )
