"""The whole-store check behind ``safepoint verify`` (and a backup's check of its copy).

Every stored checkpoint is loaded as stored (``migrate=False``: any schema
version), which checks its digest, its messages and its blobs (their bytes
against their digests: a missing blob fails here); its history row against
it; then each run's head, its run row and its call journal. What fails is
collected, not raised: one damaged row never hides the next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from safepoint.errors import CorruptCheckpoint, NotFound, SafepointError
from safepoint.model import Checkpoint
from safepoint.records import CheckpointInfo
from safepoint.tamper import checkpoint_mismatches, run_mismatches

from .facade import Store

#: Wraps the walk over every (run, checkpoint) pair: a progress bar's ``track``, or nothing.
Track = Callable[[list[tuple[str, CheckpointInfo]]], Iterable[tuple[str, CheckpointInfo]]]


@dataclass(slots=True)
class VerifyReport:
    """How many checkpoints and recorded calls were checked, and each failure as
    ``{"run_id", "step", "error" (the class name), "message"}``."""

    runs: int = 0
    checked: int = 0
    calls: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    # Audited redactions, one per run per call: the sanctioned rewrites of stored history
    # (``{"run_id", "redaction_id", "at", "found", "steps"}``; never a value).
    redactions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def verify_store(store: Store, run_id: str | None = None, *, track: Track | None = None) -> VerifyReport:
    """Check every checkpoint of ``run_id`` (or of every run) and each run's row and journal.

    ``NotFound`` when ``run_id`` names no run; a run deleted while this walks is skipped.
    """
    report = VerifyReport()

    def failed(rid: str, step: int | None, exc: SafepointError) -> None:
        failure = {"run_id": rid, "step": step, "error": type(exc).__name__, "message": str(exc)}
        if failure not in report.failures:  # a damaged head fails its own load and the head's
            report.failures.append(failure)

    runs = [run_id] if run_id else _every_run_id(store)
    report.runs = len(runs)
    keys: list[tuple[str, CheckpointInfo]] = []
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
    walk: Iterable[tuple[str, CheckpointInfo]] = keys if track is None else track(keys)
    for rid, info in walk:
        try:
            cp = store.load(rid, info.step, migrate=False)  # digests, messages, blobs: any version
            firsts.setdefault(rid, cp)  # history is oldest first
            _agree(rid, info.step, checkpoint_mismatches(info, cp), "checkpoint row")
        except NotFound:
            continue  # deleted meanwhile
        except SafepointError as exc:
            failed(rid, info.step, exc)
        report.checked += 1
    for rid in runs:  # the head as a load finds it, the run row against it, the journal
        report.calls += _verify_run(store, rid, firsts.get(rid), failed)
        report.redactions += _redactions(store, rid, failed)
    return report


def _every_run_id(store: Store) -> list[str]:
    """Every run's id, a page at a time (``admin.all_runs``'s walk; admin imports this module)."""
    ids: list[str] = []
    cursor = None
    while True:
        page = store.runs(limit=500, cursor=cursor)
        ids += [run.run_id for run in page]
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


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


def _redactions(store: Store, run_id: str, failed: Failed) -> list[dict[str, Any]]:
    """The run's audit records of redactions; a record not as written is a failure (an edit)."""
    try:
        records = store.redactions(run_id)
    except NotFound:
        return []
    except SafepointError as exc:
        failed(run_id, None, exc)
        return []
    shown = []
    for record in records:
        if not record.intact:
            detail = "its redaction record does not match its check value (edited after it was written)"
            failed(run_id, None, CorruptCheckpoint(run_id, None, detail))
            continue
        shown.append(
            {
                "run_id": run_id,
                "redaction_id": record.redaction_id,
                "at": record.at.isoformat(),
                "found": record.found,
                "steps": sorted(record.steps),
            }
        )
    return shown


def _agree(run_id: str, step: int, mismatched: list[str], row: str) -> None:
    if mismatched:
        raise CorruptCheckpoint(
            run_id, step, f"the {row}'s {', '.join(mismatched)} disagree with the checkpoint"
        )
