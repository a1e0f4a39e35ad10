"""Redaction over a whole store (or chosen runs): ``Store.redact`` — ``safepoint redact``.

It works a run per transaction (``ops/redacting.redact_run``: the run
locked meanwhile, so its writers wait for it and writers of other runs do
not), then deletes the blobs that held a finding once no row references
them (under gc's exclusive guard), then, on SQLite, overwrites the free
pages and empties the WAL so the removed bytes do not linger. A kill at any
instant leaves every run either as it was or wholly redacted with its audit
record; run it again to finish. A fork holds a copy of its parent's
messages, so the forks of a chosen run are redacted too, each in its own
transaction, and reported.

The stored history is rewritten — the one sanctioned rewrite (DESIGN's
invariant 6) — and each run's audit record says so: ``safepoint show`` and
``verify`` display it. A writer that held a run's head from before the
redaction gets ``Conflict`` on its next save (``ops/saving``) and reloads,
so it never writes the removed value back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from safepoint.errors import CorruptCheckpoint, InvalidArgument, NotFound, SafepointError, StoreError
from safepoint.records import now_micros
from safepoint.twins import Flow, Invoke

from .ops.collect import drop_unreferenced
from .ops.redacting import NOT_ROWS, redact_run, scan_runs
from .ops.resealing import scrub_free_pages
from .query import Query
from .redacted import RunRedacted
from .redaction import Redaction, ValueRedactor

__all__ = ["Redacted", "Redaction", "redact_flow"]

Progress = Callable[[int, int], None]  # (runs done, runs in all)
_PAGE = 200


@dataclass(slots=True)
class Redacted:
    """What a redaction did (or, with ``dry_run``, would do): counts, never a value."""

    redaction_id: str
    dry_run: bool
    runs_scanned: int = 0
    runs: list[RunRedacted] = field(default_factory=list)  # the runs with a finding
    forks: list[str] = field(default_factory=list)  # forks of chosen runs, redacted as copies
    failed: list[tuple[str, SafepointError]] = field(default_factory=list)
    blobs_deleted: int = 0
    bytes_scanned: int = 0  # stored values looked at (headers, bodies, journal results)

    @property
    def counts(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for run in self.runs:
            total.update(run.counts)
        return total

    @property
    def left(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for run in self.runs:
            total.update(run.left)
        return total

    @property
    def ok(self) -> bool:
        return not self.failed


def redact_flow(
    store: Any,
    redaction: Redaction,
    *,
    run_ids: Iterable[str] | None = None,
    labels: dict[str, str] | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> Flow[Redacted]:
    """Take ``redaction``'s values out of every run of ``store`` (a ``Store`` or an
    ``AsyncStore``: a flow, ``safepoint.twins``) — or of ``run_ids``, or of the runs whose
    labels hold all of ``labels`` — and out of their forks."""
    if not isinstance(redaction, Redaction):
        raise InvalidArgument(f"redaction must be a safepoint.Redaction, not {type(redaction).__name__}")
    run = store.driver.run
    settings = store.settings
    redactor = ValueRedactor(redaction, settings.blobs, settings.blob_policy)
    sealer = settings.sealer
    redaction_id = redaction.id_for(None if sealer is None else sealer.keyed)
    done = Redacted(redaction_id, dry_run)
    audit = {"id": redaction_id, **redaction.describe()}
    chosen = yield from _chosen(store, run_ids, labels)
    if run_ids is not None or labels is not None:  # forks of a chosen run hold copies of it
        chosen = yield from _with_forks(store, chosen, done)
    dropped: set[str] = set()
    for start in range(0, len(chosen), _SCAN):
        batch = chosen[start : start + _SCAN]
        scanning = scan_runs(batch, redactor, settings.sealer)
        scanned, failed = yield Invoke(run, (scanning,), {"write": False})
        done.failed += failed
        refs = {run_id: run_ref for run_ref, run_id in batch}
        for seen in scanned:
            result: RunRedacted | None = seen
            if not dry_run and seen.found:
                result = yield from _redacted(store, redactor, refs[seen.run_id], seen.run_id, audit, done)
            if result is not None and (result.found or result.left):
                done.runs.append(result)
                dropped |= result.dropped
        done.runs_scanned += len(batch)
        if progress is not None:
            progress(min(start + _SCAN, len(chosen)), len(chosen))
    done.bytes_scanned = redactor.scanned
    if dry_run:
        return done
    if settings.blobs is not None:
        # Also what an earlier, killed run of this redaction replaced and never deleted: its
        # runs hold nothing now, so only the loose blobs' contents say which held the value.
        dropping = drop_unreferenced(settings.blobs, sorted(dropped), redactor.blob_holds)
        done.blobs_deleted = yield Invoke(run, (dropping,), {"write": True})
    # SQLite's free pages and WAL overwritten (nothing on PostgreSQL: docs/secrets.md) when this
    # call, or a killed earlier run of it, rewrote something.
    seen = done.runs or done.blobs_deleted or (yield Invoke(run, (_seen(redaction_id),), {"write": False}))
    if seen:
        yield Invoke(run, (scrub_free_pages(),), {"write": True})
    return done


_SCAN = 50  # runs read per read-only transaction while looking for findings


def _redacted(  # noqa: PLR0917  (the run and what its record needs)
    store: Any,
    redactor: ValueRedactor,
    run_ref: int,
    run_id: str,
    audit: dict[str, Any],
    done: Redacted,
) -> Flow[RunRedacted | None]:
    """One run with a finding redacted in its own write transaction; a failure is recorded."""
    op = redact_run(run_ref, run_id, redactor, store.settings.sealer, now=now_micros(), audit=audit)
    scanned = redactor.scanned  # its bytes were counted by the scan
    try:
        result: RunRedacted | None = yield Invoke(store.driver.run, (op,), {"write": True})
    except StoreError:
        raise  # the backend failed: stop, and a rerun goes on from here
    except SafepointError as exc:  # this run's rows: damaged, or a blob missing
        done.failed.append((run_id, exc))
        return None
    except (TypeError, ValueError, KeyError, IndexError):  # a column edited into another shape
        done.failed.append((run_id, CorruptCheckpoint(run_id, None, NOT_ROWS)))
        return None
    finally:
        redactor.scanned = scanned
    if result is not None:
        store.settings.memory.forget(run_id)  # this process's memory of the run holds the old bytes
    return result


def _with_forks(store: Any, chosen: list[tuple[int, str]], done: Redacted) -> Flow[list[tuple[int, str]]]:
    """The chosen runs and every fork of them, forks of forks too (each a copy of its source)."""
    seen = {run_id for _, run_id in chosen}
    out = list(chosen)
    index = 0
    while index < len(out):
        _, run_id = out[index]
        index += 1
        for fork_ref, fork_id in (yield Invoke(store.driver.run, (_forks(run_id),), {"write": False})):
            if fork_id not in seen:
                seen.add(fork_id)
                out.append((fork_ref, fork_id))
                done.forks.append(fork_id)
    return out


def _chosen(
    store: Any, run_ids: Iterable[str] | None, labels: dict[str, str] | None
) -> Flow[list[tuple[int, str]]]:
    """The runs to redact, as (run_ref, run_id): named, by label, or every run."""
    run = store.driver.run
    chosen: list[tuple[int, str]] = []
    if run_ids is not None:
        if isinstance(run_ids, str) or not all(isinstance(run_id, str) for run_id in run_ids):
            raise InvalidArgument("run_ids must be a list of run ids")
        for run_id in run_ids:
            rows = yield Invoke(run, (_run_ref(run_id),), {"write": False})
            if not rows:
                raise NotFound(run_id)
            chosen.append((rows[0].run_ref, run_id))
        return chosen
    if labels is not None:
        cursor = None
        while True:
            page = yield Invoke(store.runs, (), {"labels": labels, "limit": _PAGE, "cursor": cursor})
            for info in page:
                rows = yield Invoke(run, (_run_ref(info.run_id),), {"write": False})
                if rows:
                    chosen.append((rows[0].run_ref, info.run_id))
            if page.next_cursor is None:
                return chosen
            cursor = page.next_cursor
    after = 0
    while True:
        page = yield Invoke(run, (_runs_after(after),), {"write": False})
        chosen += [(row.run_ref, row.run_id) for row in page]
        if len(page) < _PAGE:
            return chosen
        after = page[-1].run_ref


def _run_ref(run_id: str) -> Any:
    return (yield Query("run_ref_of", {"run_id": run_id}))


def _seen(redaction_id: str) -> Any:
    rows = yield Query("redaction_seen", {"redaction_id": redaction_id})
    return bool(rows and rows[0].runs)


def _forks(run_id: str) -> Any:
    return (yield Query("forks_all", {"run_id": run_id}))


def _runs_after(after: int) -> Any:
    return (yield Query("runs_after", {"after_ref": after, "limit": _PAGE}))
