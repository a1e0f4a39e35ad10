"""Write ownership of a thread: a superseded owner's write never becomes durable (opt-in).

Several workers may hold the same thread — a retried job, a deploy that
overlaps, a worker that paused past its lease. Without ownership the saver
fences each *save* (two writers never both write step n), but a slow worker
would go on appending to a thread another worker has taken over. With it::

    ownership = await saver.aclaim_write_ownership(thread_id)   # this saver now owns the thread
    await graph.ainvoke(inputs, config)                          # its writes are fenced by the claim

each claim gives the thread a higher **epoch** (a fencing token, as a
worker's lease on a run has), and from the moment a claim returns every
write of an earlier owner — ``put``, ``put_writes``, ``delete_thread`` — is
refused with ``StaleWriteOwner`` (``is_stale_write_owner_error = True``),
nothing written. Ownership is per thread and monotonic: epochs only grow,
and a saver that claimed holds its epoch until another claim supersedes it
or it releases. Reads are never refused.

How it holds: the owner record (epoch, whether held, the thread's namespaces)
lives in the root namespace's thread run, carried by every step. A claim is
a step of that run; a write to the root namespace is built on a head whose
epoch must be the writer's, and the store's step fencing makes the two
atomic (a claim in between turns the write's save into a ``Conflict``, and
its rebuild finds the new epoch). A write to a subgraph's namespace checks
the root's record each time it is built; a namespace the thread has not
used yet is first registered in the root run (a step there, fenced the
same way), and a claim, once its root step is saved, seals every namespace
it knows with its epoch (a step in each), so a stale write racing it either
lands before the claim returns or is rebuilt and refused.

A saver that never claimed writes an unclaimed thread as before; on a thread
someone owns, its writes to the namespaces the owner sealed are refused too.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from safepoint import Checkpoint, Conflict, SafepointError
from safepoint.adapters.runner import Runner
from safepoint.flow import FindRuns, Flow, load_or_none

from .layout import ADAPTER, ADAPTER_LABEL, ROLE_LABEL, THREAD_LABEL, THREAD_ROLE, ThreadKey, empty_snapshot
from .memo import Log, Memo
from .steps import Built, Context, append_step

__all__ = ["OwnershipMethods", "StaleWriteOwner", "WriteOwnership", "fence", "stamp"]

OWNER = "owner"  # the step-state field: {"epoch": int, "held": bool[, "namespaces": [ns, ...]]}


class StaleWriteOwner(Conflict):
    """The thread's write ownership passed to a newer owner (or was released); nothing was written."""

    is_stale_write_owner_error = True  # how LangGraph's proposed contract recognizes this error

    def __init__(self, run_id: str, step: int, mine: int | None, current: int | None) -> None:
        self.run_id, self.step, self.head = run_id, step, None
        self.mine, self.current = mine, current
        held = "no owner holds it now" if current is None else f"epoch {current} owns it now"
        yours = "this saver never claimed it" if mine is None else f"this saver holds epoch {mine}"
        SafepointError.__init__(
            self, f"write refused: the thread's write ownership moved on ({held}; {yours})"
        )


@dataclass(frozen=True, slots=True)
class WriteOwnership:
    """What a claim returns: the thread and the epoch this saver now writes it under."""

    thread_id: str
    epoch: int


def owner_of(cp: Checkpoint | None) -> dict[str, Any] | None:
    record = cp.state.get(OWNER) if cp is not None else None
    return record if isinstance(record, dict) else None


def fence(ctx: Context, key: ThreadKey, head: Checkpoint | None) -> Flow[None]:
    """Refuse a write of ``key`` built on ``head`` unless this saver may write the thread now."""
    mine = ctx.owners.get(key.thread_id)
    here = owner_of(head)
    if mine is None:
        if here is not None and here["held"]:
            raise StaleWriteOwner(key.thread_run, _next(head), None, here["epoch"])
        return None
    root_key = ThreadKey(key.thread_id, "")
    root = head if not key.ns else (yield from load_or_none(root_key.thread_run))
    current = owner_of(root)
    if current is None or not current["held"] or current["epoch"] != mine:
        held = current["epoch"] if current is not None and current["held"] else None
        raise StaleWriteOwner(key.thread_run, _next(head), mine, held)
    if here is not None and here["epoch"] > mine:  # a newer claim sealed this namespace
        raise StaleWriteOwner(key.thread_run, _next(head), mine, here["epoch"])
    if key.ns and key.ns not in current.get("namespaces", ()):
        yield from append_step(ctx, root_key, _record(root_key, mine, True, key.ns), flush=False)
    return None


def stamp(ctx: Context, key: ThreadKey, cp: Checkpoint) -> None:
    """Mark an owner's write to a subgraph namespace with its epoch (the root run carries its own),
    so that writers that never claimed are refused there as on the root."""
    mine = ctx.owners.get(key.thread_id)
    if mine is not None and key.ns:
        cp.state[OWNER] = {"epoch": mine, "held": True}


def _next(head: Checkpoint | None) -> int:
    return 0 if head is None else head.step + 1


def _record(key: ThreadKey, epoch: int, held: bool, *namespaces: str, claim: bool = False) -> Any:
    """A step of ``key`` that only changes its owner record (a claim, a seal, a release, a registration)."""

    def build(head: Checkpoint | None, memo: Memo) -> Generator[Any, Any, Built]:
        before = owner_of(head) or {"epoch": 0, "held": False}
        new_epoch = before["epoch"] + 1 if claim else epoch  # a claim: rebuilt on the newest record
        superseded = before["epoch"] > epoch if key.ns else (before["epoch"], before["held"]) != (epoch, True)
        if not claim and superseded:
            current = before["epoch"] if before["held"] else None
            raise StaleWriteOwner(key.thread_run, _next(head), epoch, current)
        record: dict[str, Any] = {"epoch": new_epoch, "held": held}
        if not key.ns:
            record["namespaces"] = sorted({*before.get("namespaces", ()), *namespaces})
        if head is None:
            cp = Checkpoint(run_id=key.thread_run, step=0)
            cp.state = {**empty_snapshot(), "latest": None, "recent": {}, "unindexed": [], "orphans": {}}
            cp.labels = key.labels(THREAD_ROLE)
        else:
            cp = head.next()
            cp.state = dict(head.state)
        cp.state[OWNER] = record
        return cp, memo.head_log() or Log()
        yield  # a generator, for append_step's ``yield from``

    return build


def claim(ctx: Context, thread_id: str) -> Flow[int]:
    """A new epoch for the thread (a root step), then every namespace sealed with it; the epoch."""
    root_key = ThreadKey(thread_id, "")
    found = yield FindRuns({ADAPTER_LABEL: ADAPTER, THREAD_LABEL: thread_id, ROLE_LABEL: THREAD_ROLE})
    spaces = {key.ns for key in (ThreadKey.from_labels(run.labels) for run in found) if key is not None}
    saved = yield from append_step(
        ctx, root_key, _record(root_key, 0, True, *spaces, claim=True), flush=False
    )
    record = saved.state[OWNER]
    for ns in record["namespaces"]:
        if ns:
            try:
                yield from append_step(
                    ctx, ThreadKey(thread_id, ns), _record(ThreadKey(thread_id, ns), record["epoch"], True),
                    flush=False,
                )  # fmt: skip
            except StaleWriteOwner:  # a newer claim sealed it first: this one is superseded already
                break
    ctx.owners[thread_id] = record["epoch"]
    return int(record["epoch"])


def release(ctx: Context, thread_id: str) -> Flow[None]:
    """Give the thread up: its record says nobody holds it, and this saver's epoch is forgotten."""
    mine = ctx.owners.pop(thread_id, None)
    if mine is not None:
        root_key = ThreadKey(thread_id, "")
        yield from append_step(ctx, root_key, _record(root_key, mine, False), flush=False)


class OwnershipMethods:
    """``SafepointSaver``'s write-ownership calls, sync and async (a mixin)."""

    _runner: Runner

    def _context(self) -> Context:
        raise NotImplementedError  # SafepointSaver's

    def claim_write_ownership(self, thread_id: str) -> WriteOwnership:
        """Make this saver the thread's only writer, superseding any earlier owner."""
        return WriteOwnership(str(thread_id), self._runner.run(claim(self._context(), str(thread_id))))

    async def aclaim_write_ownership(self, thread_id: str) -> WriteOwnership:
        """Make this saver the thread's only writer, superseding any earlier owner."""
        epoch = await self._runner.arun(claim(self._context(), str(thread_id)))
        return WriteOwnership(str(thread_id), epoch)

    def release_write_ownership(self, thread_id: str) -> None:
        """Stop owning the thread (savers that never claimed may write it again); no-op if not owned."""
        self._runner.run(release(self._context(), str(thread_id)))

    async def arelease_write_ownership(self, thread_id: str) -> None:
        """Stop owning the thread (savers that never claimed may write it again); no-op if not owned."""
        await self._runner.arun(release(self._context(), str(thread_id)))
