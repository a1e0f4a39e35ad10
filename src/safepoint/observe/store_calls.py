"""What each store call tells its span: the per-call ``Spec`` and the attributes it is made of.

A store method whose observer is the default (``NO_OBSERVER``) never comes
here: it checks that once and runs its call directly, so an unobserved store
pays one identity test per call. Otherwise the method runs inside an
``Operation`` (``spans.py``) named by its entry's ``Spec`` in the call table
(``safepoint.store.methods``), with the attributes its arguments give, and
adds what its result says once it returns. Every transaction goes through a store method,
the worker's too, so this is the one place a call is reported and counted.

Attributes are facts about the call — backend, step, sizes, counts, rule
names, epochs — never a stored value. What a call returns is read through
the protocols below (``SaveFacts``, ``GcResult`` …: the fields a span shows),
so this module needs nothing of the store, which imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from safepoint.model import Checkpoint, Status
from safepoint.records import Lease, Page

from .spans import AttributeDict, Operation

Done = Callable[[Operation, Any], None]
T_contra = TypeVar("T_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)


class SaveFacts(Protocol):
    """What one committed save wrote (``store.calls.SaveFacts``): sizes and counts, no value."""

    bytes_written: int
    messages_added: int
    blobs_written: int
    findings: dict[str, int]


class Call(Protocol[T_contra, R_co]):
    """A store call (``store.calls.Call``), for what its committed operation wrote."""

    @property
    def written(self) -> Callable[[T_contra], SaveFacts] | None: ...


class GcResult(Protocol):
    """What garbage collection did (``store.ops.collect.GcResult``)."""

    blobs_deleted: int
    bytes_freed: int
    blobs_kept: int


class Rewritten(Protocol):
    """What an eager migration did (``store.ops.rewrite.Rewritten``)."""

    @property
    def rewritten(self) -> Sequence[object]: ...
    @property
    def failed(self) -> Sequence[object]: ...


class PruneResult(Protocol):
    """What retention did to one run (``store.ops.retention.PruneResult``)."""

    pruned_steps: list[int]


def no_attributes() -> AttributeDict:
    return {}


@dataclass(frozen=True, slots=True)
class Spec:
    """How one store method is observed: its span's name, the attributes its
    arguments give (``attributes`` called with the values of the parameters
    named in ``params``, in that order), and what its result adds (``done``)."""

    name: str
    params: tuple[str, ...] = ()
    attributes: Callable[..., AttributeDict] = no_attributes
    done: Done | None = None

    def report(self, op: Operation, call: Call[Any, Any], raw: Any, result: Any) -> None:
        """What the call returned (and, for a save, what it wrote)."""
        if self.done is not None:
            self.done(op, result)
        if call.written is not None:
            saved(op, call.written(raw))


def of_save(cp: object, lease: object) -> AttributeDict:
    """A save's attributes known before it runs."""
    if not isinstance(cp, Checkpoint):  # refused, typed, by the call itself
        return {}
    attributes: AttributeDict = {"safepoint.run_id": _text(cp.run_id), "safepoint.step": _int(cp.step)}
    if isinstance(lease, Lease):
        attributes["safepoint.lease.epoch"] = _int(lease.epoch)
    return attributes


def saved(op: Operation, facts: SaveFacts) -> None:
    """What a committed save did: sizes, counts, scrub findings by rule."""
    findings = facts.findings
    op.update(
        {
            "safepoint.bytes_written": facts.bytes_written,
            "safepoint.messages_added": facts.messages_added,
            "safepoint.blobs_written": facts.blobs_written,
            "safepoint.scrub.findings": sum(findings.values()) if findings else 0,
        }
    )
    for rule, count in findings.items():
        op.set(f"safepoint.scrub.{rule}", count)
        op.measure("safepoint.scrub.findings", count, {"safepoint.scrub.rule": rule})
    # One histogram per save (its latency, recorded on exit): a record costs
    # the SDK about half a span, so the size is a counter and counts stay
    # span attributes.
    op.measure("safepoint.save.bytes", facts.bytes_written)
    if facts.blobs_written:
        op.measure("safepoint.blobs.written", facts.blobs_written)


def of_run(run_id: object, step: object = None) -> AttributeDict:
    """Attributes of a call on one run (and step, when given)."""
    attributes: AttributeDict = {"safepoint.run_id": _text(run_id)}
    if step is not None:
        attributes["safepoint.step"] = _int(step)
    return attributes


def of_lease(lease: object) -> AttributeDict:
    """Attributes of a heartbeat or release: the lease's run and epoch."""
    if not isinstance(lease, Lease):
        return {}
    return {
        "safepoint.run_id": _text(lease.run_id),
        "safepoint.worker_id": _text(lease.worker_id),
        "safepoint.lease.epoch": _int(lease.epoch),
    }


def of_release(lease: object, status: object, requeue: object) -> AttributeDict:
    attributes = of_lease(lease)
    attributes["safepoint.requeue"] = requeue is True
    if isinstance(status, Status):  # a plain str is shown only once the call accepted it
        attributes["safepoint.status"] = status.value
    return attributes


def of_migrate(run_ids: object) -> AttributeDict:
    return {"safepoint.migrate.runs": len(run_ids) if isinstance(run_ids, list | tuple) else 0}


def of_gc(dry_run: object) -> AttributeDict:
    return {"safepoint.dry_run": dry_run is True}


def of_claim(worker_id: object) -> AttributeDict:
    return {"safepoint.worker_id": _text(worker_id)}


def loaded(op: Operation, cp: Checkpoint) -> None:
    """What a load returned: the step it found, its size in messages and its version."""
    op.set("safepoint.step", cp.step)
    op.set("safepoint.schema_version", cp.schema_version)
    count = len(cp.messages)
    op.set("safepoint.messages", count)
    op.measure("safepoint.load.messages", count)


def forked(op: Operation, cp: Checkpoint) -> None:
    op.set("safepoint.new_run_id", cp.run_id)
    op.set("safepoint.step", cp.step)


def listed(op: Operation, page: Page[Any]) -> None:
    op.set("safepoint.runs", len(page.items))


def claimed(op: Operation, lease: Lease | None) -> None:
    op.set("safepoint.claimed", lease is not None)
    if lease is not None:
        op.set("safepoint.run_id", lease.run_id)
        op.set("safepoint.lease.epoch", lease.epoch)


def collected(op: Operation, result: GcResult) -> None:
    op.set("safepoint.gc.blobs_deleted", result.blobs_deleted)
    op.set("safepoint.gc.bytes_freed", result.bytes_freed)
    op.set("safepoint.gc.blobs_kept", result.blobs_kept)


def migrated(op: Operation, result: Rewritten) -> None:
    op.set("safepoint.migrate.rewritten", len(result.rewritten))
    op.set("safepoint.migrate.failed", len(result.failed))


def pruned(op: Operation, result: PruneResult) -> None:
    op.set("safepoint.prune.steps", len(result.pruned_steps))


def counted(key: str) -> Done:
    """A ``done`` that sets ``key`` to the length of the result."""

    def done(op: Operation, result: Any) -> None:
        op.set(key, len(result))

    return done


# Arguments are attributes before the call has validated them: anything but
# the expected type is left out (the call then refuses it, typed).
def _text(value: object) -> str:
    return value if type(value) is str else ""


def _int(value: object) -> int:
    return value if type(value) is int else -1
