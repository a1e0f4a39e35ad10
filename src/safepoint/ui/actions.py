"""The inspector's actions (``safepoint ui --allow-actions``): answer, cancel, requeue.

The same store calls as the CLI's ``answer``, ``cancel`` and ``requeue``:
an answer resumes the waiting run (``Run.resume_with``) and hands it back
to the workers that serve it; a run a worker holds a live lease on is left
alone (``Conflict``): the page never fences a worker off.
"""

from __future__ import annotations

from safepoint import Run
from safepoint.cli.operate import back_to_workers, to_ourselves
from safepoint.errors import InvalidArgument, RunStatusError
from safepoint.model import Status
from safepoint.store import Store

ACTIONS = ("answer", "cancel", "requeue")


def perform(store: Store, run_id: str, action: str, value: str) -> None:
    """Do ``action`` to the run; a typed ``SafepointError`` says why not."""
    if not run_id or action not in ACTIONS:
        raise InvalidArgument("the form names no run or no known action")
    if action == "cancel":
        store.cancel(run_id)
    elif action == "requeue":
        store.requeue(run_id)
    else:
        head = store.load(run_id, migrate=False, fetch_blobs=False)
        if head.status is not Status.WAITING:
            raise RunStatusError(run_id, head.status.value, "only a waiting run takes an answer")
        with to_ourselves(store, run_id, False) as state:
            run = Run.resume_with(store, run_id, value)
            run.close()  # answered and saved: let the run go at once
        back_to_workers(store, state, run)
