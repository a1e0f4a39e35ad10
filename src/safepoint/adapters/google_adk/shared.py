"""``app:`` and ``user:`` state: one run per app and one per (app, user), shared by their sessions.

Each run's steps hold the whole scope as ``state["values"]``; an update is the
next step with the delta merged in (``dict.update``, as ADK's services do). Two
writers updating one scope at once are fenced by the store: the one that
loses the race gets a ``Conflict``, reloads and merges its delta into the new
head, so no update is lost. The runs are bookkeeping to ``safepoint runs``
(``safepoint.role=index``); ``safepoint runs --all`` lists them.
"""

from __future__ import annotations

from typing import Any

from safepoint import Checkpoint
from safepoint.adapters.cache import MAX_ATTEMPTS, CheckpointCache, gave_up, save_cached, thaw
from safepoint.flow import Flow, load_or_none

from .naming import app_run_id, shared_labels, user_run_id


def scope_run(app_name: str, user_id: str | None) -> str:
    """The run of the app's scope (``user_id`` None) or of one user's."""
    return app_run_id(app_name) if user_id is None else user_run_id(app_name, user_id)


def read(app_name: str, user_id: str | None) -> Flow[dict[str, Any]]:
    """The scope's values now ({} when nothing was ever stored in it)."""
    head = yield from load_or_none(scope_run(app_name, user_id))
    return {} if head is None else thaw(head.state.get("values", {}))


def update(cache: CheckpointCache, app_name: str, user_id: str | None, delta: dict[str, Any]) -> Flow[None]:
    """Merge ``delta`` into the scope, retrying on the new head when another writer got there first."""
    if not delta:
        return
    run_id = scope_run(app_name, user_id)
    for _ in range(MAX_ATTEMPTS):
        cached = cache.get(run_id)
        head: Checkpoint | None = cached[0] if cached is not None else (yield from load_or_none(run_id))
        cp = head.next() if head is not None else Checkpoint(run_id=run_id, step=0)
        cp.labels = shared_labels(app_name, user_id)
        cp.state = {"values": {**thaw(cp.state.get("values", {})), **delta}}
        if (yield from save_cached(cache, cp)):  # else another writer moved the scope: merge again
            return
    raise gave_up(run_id, cp.step)
