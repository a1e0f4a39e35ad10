"""Eager migration, as an operation: rewrite runs' head checkpoints in place, in one transaction.

``Store.migrate_runs`` builds it (``safepoint migrate``, through
``safepoint.store.admin.migrate_store``, runs it in batches); see
``rewrite_heads``. History checkpoints are never rewritten: they are migrated
on read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from safepoint import codec
from safepoint.errors import SafepointError, StoreError
from safepoint.model import Checkpoint
from safepoint.records import to_micros
from safepoint.store.delta import MessagePlan
from safepoint.store.prepare import PreparedSave
from safepoint.store.query import Op, Query
from safepoint.store.stored_row import checkpoint_row

from .loading import load_typed
from .saving import NO_RUN


@dataclass(frozen=True, slots=True)
class Rewritten:
    """What ``rewrite_heads`` did: runs rewritten, and runs whose rewrite failed."""

    rewritten: list[str]
    failed: list[tuple[str, int, SafepointError]]


def rewrite_heads(
    run_ids: list[str],
    rewrite: Callable[[Checkpoint], Checkpoint | None],
    prepare: Callable[[Checkpoint], PreparedSave],
    now: int,
) -> Op[Rewritten]:
    """Replace each run's head checkpoint in place by ``rewrite(head)``, in one transaction.

    For eager migration: ``rewrite`` returns the migrated checkpoint, or None
    when the head needs nothing. A run whose rewrite raises a safepoint error
    is left as it is and reported; the others are still rewritten.
    """
    done: list[str] = []
    failed: list[tuple[str, int, SafepointError]] = []
    for run_id in run_ids:
        rows = yield Query("run_head", {"run_id": run_id, "labels": None})
        next_seq, run_ref, head_step, *_ = rows[0] if rows else NO_RUN
        if run_ref is None:
            continue  # deleted since it was listed
        head, *_ = yield from load_typed(run_id, head_step)
        try:
            new = rewrite(head)
            if new is None:
                continue
            prepared = prepare(new)
            plan = prepared.plan(head.stored_view, new.messages)
        except SafepointError as exc:
            failed.append((run_id, head_step, exc))
            continue
        ((first_seq, added, packed, carried_chains),) = yield Query(
            "head_messages", {"run_ref": run_ref, "step": head_step}
        )
        if first_seq + added != next_seq:
            raise StoreError(f"run {run_id!r}: its head row does not end the message log; not rewritten")
        carried = [bytes(packed)] if packed is not None else []
        assert head.created_at is not None
        row = checkpoint_row(
            new,
            prepared.fields,
            created_at=to_micros(head.created_at),
            count=plan.total,
            chain=plan.chains[-1] if plan.chains else codec.EMPTY_CHAIN,
            report=prepared.report(),
            ranges=plan.ranges(next_seq),
            # The new messages go in the head's own row.
            carriers=plan.carriers(next_seq, head_step),
            chains=_chains(added, carried_chains, plan),
            bodies=carried + plan.bodies,
        )
        row.update(run_ref=run_ref, next_seq=next_seq + len(plan.bodies), now=now)
        yield Query("rewrite_checkpoint", row)
        yield Query("rewrite_run_head", row)
        done.append(run_id)
    return Rewritten(done, failed)


def _chains(added: int, carried: bytes | None, plan: MessagePlan) -> bytes | None:
    """The head row's chain values once the plan's new messages join the ones it carries
    (None when the row had none: written before the column, its saves read bodies)."""
    if added and carried is None:
        return None
    new = plan.chains[plan.total - len(plan.bodies) : plan.total]
    joined = (bytes(carried) if carried is not None else b"") + b"".join(new)
    return joined or None
