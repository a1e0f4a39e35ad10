"""A run taken out of the workers' hands for one change, and handed back — the operator's way in.

The CLI's ``answer``, ``budget`` (and the inspector's answer) change a run
that workers may serve. A live lease means a worker may be working on the
run right now: :func:`to_ourselves` refuses (``Conflict``) unless told to
fence the worker off; :func:`back_to_workers` queues the run again once the
change made it runnable. :func:`answer_waiting` is the whole answer, as the
CLI and the inspector both give it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from safepoint import Run
from safepoint.errors import Conflict, RunStatusError
from safepoint.model import Status
from safepoint.store import QueueState, Store

__all__ = ["answer_waiting", "back_to_workers", "to_ourselves"]


@contextmanager
def to_ourselves(store: Store, run_id: str, force: bool) -> Iterator[QueueState]:
    """The run, with no live lease on it, for one change; the queue state as it was.

    A live lease means a worker may be working on the run: ``Conflict``
    unless ``force``, which revokes it (the worker is fenced off and the run
    leaves the queue). Should the change then fail, the run goes back in the
    queue it was taken from.
    """
    state = store.queue_state(run_id)
    if not state.leased():
        yield state
        return
    if not force:
        head = store.run(run_id).head_step
        until = "-" if state.expires_at is None else f"{state.expires_at:%Y-%m-%d %H:%M:%S}"
        raise Conflict(
            run_id,
            head + 1,
            head,
            detail=f"a worker holds its lease (until {until} UTC) and may be working on it; "
            "--force fences the worker off first",
        )
    before = store.revoke_lease(run_id)
    try:
        yield before
    except BaseException:
        if before.queued:
            store.enqueue(run_id)
        raise


def back_to_workers(store: Store, state: QueueState, run: Run) -> bool:
    """Queue a run that workers serve once it is runnable again; whether it was queued."""
    if run.status is Status.RUNNING and state.served_by_workers:
        store.enqueue(run.run_id)
        return True
    return False


def answer_waiting(store: Store, run_id: str, reply: Any, *, force: bool) -> tuple[Run, QueueState, bool]:
    """Answer a run waiting for human input (``Run.resume_with``): the run, the queue state it was
    taken from, and whether it went back to the workers. Only a waiting run takes an answer."""
    head = store.load(run_id, migrate=False, fetch_blobs=False)
    if head.status is not Status.WAITING:
        raise RunStatusError(run_id, head.status.value, "only a waiting run takes an answer")
    with to_ourselves(store, run_id, force) as state:
        run = Run.resume_with(store, run_id, reply)
        run.close()  # answered and saved: let the run go at once
    return run, state, back_to_workers(store, state, run)
