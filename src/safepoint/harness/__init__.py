"""The step loop for hand-written agent harnesses: ``Run`` (sync) and ``AsyncRun`` (asyncio).

A run is started or resumed from its latest checkpoint; each step appends
messages, adds usage, takes actions, advances cursors and updates state,
then commits — one atomic checkpoint. Around that, the harness keeps the
bookkeeping a resumed run must not forget:

* pending actions with idempotency keys, reconciled after a crash (``actions.py``);
* budgets on tokens, spend and steps, stored with the run (``budgets.py``);
* human input: a run stops as ``waiting`` and any process answers it;
* one live writer: an open ``Run`` holds its run's lease until it is closed
  (``exclusive.py``, ``holders.py``); a second opener waits, then ``RunHeld``;
* the call journal: ``run.call`` and ``run.action`` record their results, which a
  resumed run gets back instead of calling again (``journaled.py``).

The logic lives once, as I/O-free flows (``core.py``); ``Run`` blocks on a
``Store``, ``AsyncRun`` awaits an ``AsyncStore``. See docs/harness.md.
"""

from __future__ import annotations

from safepoint.errors import BudgetExceeded
from safepoint.reconcile import Reconcile
from safepoint.records import CallUsage

from .actions import PendingAction, ReconcileHook, idempotency_key
from .asyncrun import AsyncRun
from .budgets import Budget
from .errors import ActionMismatch, RunStatusError
from .run import Run

__all__ = [
    "ActionMismatch",
    "AsyncRun",
    "Budget",
    "BudgetExceeded",
    "CallUsage",
    "PendingAction",
    "Reconcile",
    "ReconcileHook",
    "Run",
    "RunStatusError",
    "idempotency_key",
]
