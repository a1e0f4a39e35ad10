"""Stored columns outside the digest, checked against the checkpoints they describe.

A checkpoint's digest covers its header (every field but the messages, which
it pins by chain). Listings do not read the header: ``history`` reads the
checkpoint row's status, schema_version, message count, time and digest;
``runs`` and ``Store.run`` read the run row's labels and (on PostgreSQL) its
head step, schema_version and counters. A load never trusts these (it reads
the header and, on PostgreSQL, checks the run row's head step and digest),
but a listing would show an altered one as if it were true. ``safepoint
verify`` loads each checkpoint and compares: these functions say what
differs, by column name only — never a stored value.

The run row's status is the queue's view of the run: a save sets it to its
checkpoint's, but a worker's release may set another (a quarantined run is
failed), ``requeue`` makes a failed run running and ``cancel`` may cancel a
run whose head does not load — without a checkpoint. Those record the change
on the run row until the next save (``Store.status_origin``), so the status
must be the head checkpoint's or the one a current record names.
"""

from __future__ import annotations

from safepoint.model import Checkpoint
from safepoint.records import CheckpointInfo, RunInfo, StatusOrigin


def checkpoint_mismatches(info: CheckpointInfo, cp: Checkpoint) -> list[str]:
    """The columns of a checkpoint row (as ``history`` lists it) that disagree with the loaded checkpoint."""
    checks = {
        "status": info.status == cp.status,
        "schema_version": info.schema_version == cp.schema_version,
        "message count": info.message_count == len(cp.messages),
        "created_at": info.created_at == cp.created_at,
        "digest": info.digest == cp.digest,
    }
    return [name for name, same in checks.items() if not same]


def run_mismatches(
    run: RunInfo, head: Checkpoint, first: Checkpoint | None = None, origin: StatusOrigin | None = None
) -> list[str]:
    """The columns of the run row (as ``runs`` lists it) that disagree with its loaded head
    checkpoint — and, given the run's first stored checkpoint, its parent: a fork writes the
    parent into the first checkpoint it stores, so the run row's copy must match it. Given
    the row's ``StatusOrigin``, its status too: the head's, unless a current record says
    which change without a checkpoint set it."""
    checks = {
        "head step": run.head_step == head.step,
        "schema_version": run.schema_version == head.schema_version,
        "labels": run.labels == head.labels,
        "counters": run.counters == head.counters,
    }
    if first is not None:
        checks["parent"] = run.parent == first.parent
    if origin is not None:
        checks["status"] = origin.set_by is not None or origin.status == head.status.value
    return [name for name, same in checks.items() if not same]
