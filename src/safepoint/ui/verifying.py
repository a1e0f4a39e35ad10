"""Verify from the page: one run at once, or the whole store as a background task with progress.

Verifying loads every checkpoint as stored (``migrate=False``: any schema
version), which checks its digests, its messages' chain and its blobs, then
the run row against its head (``safepoint.tamper``), then the run's recorded
calls (``Store.verify_calls``). The
whole store is walked by one thread at a time; the page polls
``progress()``.
"""

from __future__ import annotations

import threading
from typing import Any

from safepoint.errors import SafepointError
from safepoint.store import Store
from safepoint.store.admin import all_runs
from safepoint.tamper import run_mismatches

MAX_SHOWN = 50  # failures listed on the page


def verify_run(store: Store, run_id: str) -> tuple[int, list[tuple[int | None, str]]]:
    """(checkpoints checked, [(step, what is wrong)]) for one run."""
    failures: list[tuple[int | None, str]] = []
    checked = 0
    try:
        steps = [info.step for info in store.history(run_id)]
    except SafepointError as exc:
        return 0, [(None, str(exc))]
    for step in steps:
        try:
            store.load(run_id, step, migrate=False)
        except SafepointError as exc:
            failures.append((step, str(exc)))
        checked += 1
    try:  # the run row against its head, as safepoint verify checks it (its status included)
        head = store.load(run_id, migrate=False, fetch_blobs=False)
        mismatched = run_mismatches(store.run(run_id), head, None, store.status_origin(run_id))
        if mismatched:
            what = f"the run row's {', '.join(mismatched)} disagree with the checkpoint"
            failures.append((head.step, what))
    except SafepointError as exc:
        if (getattr(exc, "step", None), str(exc)) not in failures:  # a damaged head: said above
            failures.append((getattr(exc, "step", None), str(exc)))
    try:  # the call journal, as safepoint verify checks it
        failures += [(damaged.step, str(damaged)) for damaged in store.verify_calls(run_id).damaged]
    except SafepointError as exc:
        failures.append((None, str(exc)))
    return checked, failures


class StoreVerifier:
    """The whole-store verification: started from the page, one at a time, its progress polled."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._state: dict[str, Any] = {"running": False, "runs": 0, "done": 0, "checked": 0, "failures": []}

    def start(self) -> bool:
        """Begin, unless a verification is running already; whether this call began one."""
        with self._lock:
            if self._state["running"]:
                return False
            self._state = {"running": True, "runs": 0, "done": 0, "checked": 0, "failures": []}
        threading.Thread(target=self._walk, name="safepoint-ui-verify", daemon=True).start()
        return True

    def progress(self) -> dict[str, Any]:
        with self._lock:
            return {**self._state, "failures": list(self._state["failures"])}

    def _walk(self) -> None:
        try:
            run_ids = [info.run_id for info in all_runs(self._store)]
            with self._lock:
                self._state["runs"] = len(run_ids)
            for run_id in run_ids:
                checked, failures = verify_run(self._store, run_id)
                with self._lock:
                    self._state["done"] += 1
                    self._state["checked"] += checked
                    room = MAX_SHOWN - len(self._state["failures"])
                    self._state["failures"] += [(run_id, step, text) for step, text in failures[:room]]
        except Exception as exc:  # reported on the page, never raised into a thread's void
            with self._lock:
                self._state["failures"].append(("", None, f"verification stopped: {type(exc).__name__}"))
        finally:
            with self._lock:
                self._state["running"] = False
