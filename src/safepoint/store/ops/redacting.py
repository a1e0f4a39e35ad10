"""Redacting one run as stored, in one transaction (``redact_run``), and reading its audit records.

Like ``resealing.py``, these operations see values as stored — they are run
on the driver directly, not through ``sealed_ops`` — and the store's
``Sealer`` opens and seals them (``store/redacted.py``, which works out what
to write). The run row is read first and locked (PostgreSQL: ``FOR
UPDATE``; SQLite's write transaction takes the file), so the run's writers
wait for the redaction and writers of other runs do not.

A run with nothing to find is not written at all: a rerun after a kill
leaves the runs already done alone and finishes the others. A run that
changed gets its audit record in the same transaction — one per run per
redaction call: a rerun of the same call completes it, never adds a second.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from safepoint import codec
from safepoint.errors import CorruptCheckpoint, SafepointError, StoreError
from safepoint.records import from_micros
from safepoint.store.blob_targets import BlobTarget
from safepoint.store.query import Op, Query
from safepoint.store.redacted import RunRedacted, RunRedaction
from safepoint.store.redaction import RedactionRecord, ValueRedactor
from safepoint.store.sealer import Sealer

from .loading import read_blobs

Failures = list[tuple[str, SafepointError]]


def scan_runs(
    runs: list[tuple[int, str]], redactor: ValueRedactor, sealer: Sealer | None
) -> Op[tuple[list[RunRedacted], Failures]]:
    """What redacting each of ``runs`` would find and change, in one read-only transaction:
    most runs hold nothing, and only the ones that do are then redacted, each in a write
    transaction of its own (``redact_run``, which reads them again under its lock). A run
    whose rows cannot be read as safepoint writes them is listed in the failures."""
    found: list[RunRedacted] = []
    failed: Failures = []
    # Three queries for the whole batch (a query per run cost more than the looks on PostgreSQL).
    refs = {"run_refs": codec.encode([run_ref for run_ref, _ in runs]).decode()}
    heads = {row.run_ref: row for row in (yield Query("redaction_runs_of", refs))}
    stored_rows = yield Query("redaction_rows_of", refs)
    stored_calls = yield Query("redaction_calls_of", refs)
    rows, calls = _by_run(stored_rows), _by_run(stored_calls)
    fetched = yield from _database_blobs(redactor, [*stored_rows, *stored_calls])  # one read for all
    for run_ref, run_id in runs:
        if run_ref not in heads:
            continue  # deleted since it was listed
        try:
            work = yield from _worked_out(
                run_ref,
                run_id,
                heads[run_ref],
                rows.get(run_ref, []),
                calls.get(run_ref, []),
                redactor,
                sealer,
                fetched,
            )
        except StoreError:
            raise  # the backend failed: the whole scan is retried or reported
        except SafepointError as exc:  # damaged rows, a blob missing, a seal that does not open
            failed.append((run_id, exc))
            continue
        except (TypeError, ValueError, KeyError, IndexError):  # a column edited into another shape
            failed.append((run_id, CorruptCheckpoint(run_id, None, NOT_ROWS)))
            continue
        if work is not None:
            found.append(work.done)
    return found, failed


NOT_ROWS = "its stored rows are not in the form safepoint writes them"


def _by_run(rows: list[Any]) -> dict[int, list[Any]]:
    grouped: dict[int, list[Any]] = {}
    for row in rows:
        grouped.setdefault(row.run_ref, []).append(row)
    return grouped


def redact_run(
    run_ref: int,
    run_id: str,
    redactor: ValueRedactor,
    sealer: Sealer | None,
    *,
    now: int,
    audit: dict[str, Any],
) -> Op[RunRedacted | None]:
    """Redact one run's rows, journal and run row; None when the run was deleted since it was listed."""
    found = yield Query("sealed_run", {"run_ref": run_ref})  # locked until commit
    if not found:
        return None
    stored_rows = yield Query("redaction_rows", {"run_ref": run_ref})
    stored_calls = yield Query("redaction_calls", {"run_ref": run_ref})
    work = yield from _worked_out(run_ref, run_id, found[0], stored_rows, stored_calls, redactor, sealer)
    done, target = work.done, redactor.blobs
    pending = redactor.sink.pending
    if not (work.row_writes or work.call_writes or work.run_write):
        return done
    if pending and target is not None:
        yield Query("blob_guard_shared")  # held until commit: gc takes it exclusively
        target.put_all(pending)  # durable before the rows that reference them commit
        yield from target.write(pending, now)
    if work.row_writes:
        yield Query("redact_row", many=work.row_writes)
    if work.call_writes:
        yield Query("redact_call", many=work.call_writes)
    if work.run_write is not None:
        yield Query("reseal_run", work.run_write)
    head_step = work.rows[-1].step if work.rows else None
    done.record = yield from _audit(run_ref, run_id, head_step, done, audit, now, sealer)
    return done


def _worked_out(  # noqa: PLR0917  (the run as read, and what works on it)
    run_ref: int,
    run_id: str,
    run: Any,
    stored_rows: list[Any],
    stored_calls: list[Any],
    redactor: ValueRedactor,
    sealer: Sealer | None,
    fetched: dict[str, bytes] | None = None,
) -> Op[RunRedaction]:
    """One run as read (its run row, checkpoint rows and journal) worked out: what to write.
    ``fetched``: the database target's blobs read already (else read here, for this run)."""
    if fetched is None:
        fetched = yield from _database_blobs(redactor, [*stored_rows, *stored_calls])
    redactor.start(_fetcher(redactor.blobs, fetched))
    work = RunRedaction(run_ref, run_id, redactor, sealer)
    work.row_writes = work.rows_to_write(stored_rows)
    work.call_writes = work.calls_to_write(stored_calls)
    work.run_write = work.run_to_write(run)
    work.done.counts = redactor.counts
    work.done.blobs_new = len(redactor.sink.pending)
    return work


def _database_blobs(redactor: ValueRedactor, rows: list[Any]) -> Op[dict[str, bytes]]:
    """The stored blobs ``rows`` reference, when they live in the database (one query)."""
    target = redactor.blobs
    if target is None or not target.in_database:
        return {}
    digests: set[str] = set()
    for row in rows:
        if row.blobs:
            digests.update(codec.decode(row.blobs))
    return (yield from read_blobs(sorted(digests))) if digests else {}


def _fetcher(target: BlobTarget | None, fetched: dict[str, bytes]) -> Any:
    """Blobs' contents by digest: the database target's read in this transaction, others fetched."""

    def fetch(digests: list[str]) -> Any:
        if target is None or not digests:
            return {}
        # Only the asked-for rows: a database target's fetch verifies every row it is handed.
        return target.fetch(digests, {digest: fetched[digest] for digest in digests if digest in fetched})

    return fetch


def _audit(  # noqa: PLR0917  (the record's parts, each once)
    run_ref: int,
    run_id: str,
    head_step: int | None,
    done: RunRedacted,
    audit: dict[str, Any],
    now: int,
    sealer: Sealer | None,
) -> Op[dict[str, Any]]:
    """Write this call's audit record of the run, or complete the one a killed run of it began."""
    existing = yield Query("redaction_record", {"run_ref": run_ref, "redaction_id": audit["id"]})
    record = dict(audit)
    counts: Counter[str] = Counter(done.counts)
    steps: Counter[str] = Counter({str(step): count for step, count in done.steps.items()})
    record["first_at"] = now
    if existing:
        earlier = codec.decode(existing[0].record)
        counts.update(earlier.get("counts", {}))
        steps.update(earlier.get("steps", {}))
        record["first_at"] = earlier.get("first_at", now)
    record.update(at=now, counts=dict(counts), steps=dict(steps), head_step=head_step)
    body = codec.encode(record)
    params = {
        "run_ref": run_ref,
        "redaction_id": audit["id"],
        "head_step": head_step,
        "now": now,
        "record": body.decode(),
        "mac": record_mac(run_id, body, sealer),
    }
    yield Query("put_redaction_record", params)
    return record


def record_mac(run_id: str, body: bytes, sealer: Sealer | None) -> bytes:
    """An audit record's check value: SHA-256 of run id and record, keyed under the index key
    on an encrypted store (like the checkpoint digests), so that only a key holder forges one."""
    plain = codec.digest(run_id.encode("utf-8", "surrogatepass") + b"\x1f" + body)
    return plain if sealer is None else sealer.keyed(plain)


def key_records(run_ref: int, run_id: str, sealer: Sealer) -> Op[int]:
    """The run's audit records written while the store was plain, their check values keyed
    under the index key (``encrypt``, in the run's reseal transaction): else every record
    written before the conversion would read as edited (``intact`` False). How many changed."""
    changed = 0
    for row in (yield Query("redaction_records", {"run_id": run_id})):
        body = str(row.record).encode("utf-8", "surrogatepass")
        if record_mac(run_id, body, None) != bytes(row.mac):
            continue  # keyed already (a rerun), or not as written: left for verify to report
        mac = record_mac(run_id, body, sealer)
        yield Query(
            "key_redaction_record", {"run_ref": run_ref, "redaction_id": row.redaction_id, "mac": mac}
        )
        changed += 1
    return changed


def redaction_records(run_id: str, sealer: Sealer | None) -> Op[list[RedactionRecord]]:
    """A run's audit records, oldest first, each checked against its check value."""
    out = []
    for row in (yield Query("redaction_records", {"run_id": run_id})):
        body = str(row.record).encode("utf-8", "surrogatepass")
        intact = record_mac(run_id, body, sealer) == bytes(row.mac)
        try:
            data = codec.decode(body)
            named = {name: data.get(name) for name in ("secrets", "rules", "pii", "values")}
            counts = {str(rule): int(count) for rule, count in data.get("counts", {}).items()}
            steps = {int(step): int(count) for step, count in data.get("steps", {}).items()}
        except (ValueError, TypeError, AttributeError):
            named, counts, steps, intact = {}, {}, {}, False
        at = from_micros(row.created_at)
        out.append(RedactionRecord(str(row.redaction_id), at, named, counts, steps, intact))
    return out
