"""``safepoint verify``: every stored checkpoint loaded and checked, and each run's row against them."""

from __future__ import annotations

import sys
from typing import Any

import click
from rich.progress import Progress

from safepoint.cli.output import console, emit, handle_errors, open_store_at, say, store_options
from safepoint.errors import CorruptCheckpoint, NotFound, SafepointError
from safepoint.model import Checkpoint
from safepoint.store.admin import all_runs
from safepoint.tamper import checkpoint_mismatches, run_mismatches
from safepoint.visible import visible


@click.command()
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
        for rid in runs:  # the head as a load finds it, and the run row against it
            try:
                for step in store.hidden_steps(rid):  # a live checkpoint flagged pruned by hand
                    hidden = CorruptCheckpoint(rid, step, "marked pruned but still holds a checkpoint")
                    failed(rid, step, hidden)
                head = store.load(rid, migrate=False, fetch_blobs=False)
                origin = store.status_origin(rid)
                mismatched = run_mismatches(store.run(rid), head, firsts.get(rid), origin)
                _agree(rid, head.step, mismatched, "run row")
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
