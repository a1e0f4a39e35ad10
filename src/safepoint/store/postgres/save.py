"""A PostgreSQL save in one statement, for a writer that knows its run's head.

``ops.save`` reads the run row first (``run_head``, locked FOR UPDATE), checks
it in Python, then writes the run row and the checkpoint row: three
statements, and a round trip spent waiting for the first. Most saves are by
a writer whose checkpoint came from the run's head (it saved or loaded it),
so it already knows what ``run_head`` will say. ``save`` here drives
``ops.save`` itself with that expected row, collects the writes it would
make (the same parameters, built by the same code), and sends them as one
statement, ``save_next`` (``save.sql``), that applies them only where the
row really is as expected; the conditions are ``ops.save``'s own checks, in
SQL.

``save_next`` ends its transaction (``steps.FINAL``): the driver sends
BEGIN, set_config, it and COMMIT together, so the save is one round trip,
and durable when its rows come back. When it wrote nothing (another writer
moved the head, a lease was lost or is held by someone else, or the guessed
next seq was wrong), ``save`` runs ``ops.save`` as usual, in a new
transaction, which raises ``Conflict`` or ``LeaseLost`` or re-plans exactly
as it always does; the empty transaction before it changed nothing. A save
that writes or references blobs, or starts a run, goes the usual way from
the start: nothing is sent before that is known.

Invariants are ``ops.save``'s: the save's writes in one transaction (atomic,
durable at COMMIT), the run row locked by the statement that changes it, the
lease epoch checked in that same statement, and ``Conflict`` for anything
but the next step.

Wiring: both PostgreSQL drivers name this function as their ``save_op``;
the stores pass it to ``calls.save``, which builds it in place of
``ops.save`` (SQLite has no ``save_op`` and keeps ``ops.save``).
"""

from __future__ import annotations

from typing import Any

from safepoint.messagelist import StoredView
from safepoint.model import Checkpoint, Lease
from safepoint.store import ops
from safepoint.store.ops import SaveResult
from safepoint.store.pipeline import PreparedSave
from safepoint.store.query import Op, Query
from safepoint.store.serialize import MessagePlan

# The statements of ops.save that save_next stands for; anything else it
# asks for (blobs, a new run, a re-plan) means the usual way.
_FOLDED = frozenset({"advance_run", "set_run_status", "insert_checkpoint"})

# ops.save, whatever a caller later binds to that name: save() falls back on it.
_generic_save = ops.save


def save(
    cp: Checkpoint,
    prepared: PreparedSave,
    view: StoredView | None,
    plan: MessagePlan,
    *,
    now: int,
    lease: Lease | None = None,
) -> Op[SaveResult[MessagePlan]]:
    """``ops.save``, in one statement when ``view`` is the run's head (same arguments, same result)."""
    if view is not None and view.run_id == cp.run_id and cp.step == view.step + 1:
        folded = _fold(cp, prepared, view, plan, now=now, lease=lease)
        if folded is not None:
            params, result = folded
            if (yield Query("save_next", params)):
                return result
    return (yield from _generic_save(cp, prepared, view, plan, now=now, lease=lease))


def _fold(
    cp: Checkpoint,
    prepared: PreparedSave,
    view: StoredView,
    plan: MessagePlan,
    *,
    now: int,
    lease: Lease | None,
) -> tuple[dict[str, Any], SaveResult[MessagePlan]] | None:
    """Run ``ops.save`` against the head ``view`` implies; its writes as one parameter dict.

    None when it asks for anything ``save_next`` does not cover. Nothing
    here touches the database: the queries go nowhere.
    """
    # The run's next free seq: where the view's log ends, unless a rewrite
    # dropped its tail (then save_next finds a different next_seq and declines).
    first_seq = view.ranges[-1][1] if view.ranges else 0
    owner, epoch = (lease.worker_id, lease.epoch) if lease is not None else (None, 0)
    # run_head's columns (see ops.save); the run row's id is not known here
    # and not needed: save_next finds the row by run_id.
    expected = type(ops.NO_RUN)(
        (first_seq, 0, view.step, view.digest, cp.status.value, owner, epoch, None, True)
    )
    op = _generic_save(cp, prepared, view, plan, now=now, lease=lease)
    params: dict[str, Any] | None = None
    try:
        query = next(op)
        if query.name != "run_head":
            return None
        query = op.send([expected])
        while True:
            if query.name not in _FOLDED:
                return None
            params = query.params
            query = op.send([])
    except StopIteration as stop:
        result: SaveResult[MessagePlan] = stop.value
    finally:
        op.close()
    if params is None:
        return None
    guards = {
        "head_digest": view.digest,
        "lease_owner": owner,
        "lease_epoch": epoch if lease is not None else None,
    }
    return params | guards, result
