"""The inspector's actions (``safepoint ui --allow-actions``): answer, cancel, requeue.

The same store calls as the CLI's ``answer``, ``cancel`` and ``requeue``:
an answer resumes the waiting run (``safepoint.handover.answer_waiting``) and
hands it back to the workers that serve it; a run a worker holds a live lease
on is left alone (``Conflict``): the page never fences a worker off.
"""

from __future__ import annotations

from safepoint.errors import InvalidArgument
from safepoint.handover import answer_waiting
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
        answer_waiting(store, run_id, value, force=False)
