"""``Job``: one claimed run, as a ``Worker``'s handler sees it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from safepoint import retrying
from safepoint.harness import ReconcileHook, Run
from safepoint.model import Checkpoint, Status
from safepoint.records import CheckpointInfo, Lease
from safepoint.retrying import RetryPolicy
from safepoint.store import Store


@dataclass
class Job:
    """One claimed run, as the handler sees it."""

    store: Store
    lease: Lease
    checkpoint: Checkpoint
    _stop: threading.Event
    lost: threading.Event = field(default_factory=threading.Event)
    retry: RetryPolicy = retrying.DEFAULT_POLICY
    # The checkpoint as loaded while it is still the run's head as far as this job knows:
    # handed to the first ``open_run``, forgotten once that or a ``save`` moved the run on.
    _loaded: Checkpoint | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._loaded = self.checkpoint

    @property
    def run_id(self) -> str:
        return self.lease.run_id

    def open_run(self, *, reconcile: Mapping[str, ReconcileHook] | None = None) -> Run:
        """The run as a ``Run`` under this job's lease, starting from the checkpoint the worker
        loaded and verified (``checkpoint``): ``Run.open(job.store, job.run_id,
        lease=job.lease)`` without loading the run again.

        Everything ``open`` does to a loaded run still happens: a run that is
        not running — or that its row says a worker quarantined (the claim
        read the row) — comes back inactive; one already over budget is saved
        as failed and ``BudgetExceeded`` raised; an action a crash left
        pending goes to its tool's ``reconcile`` hook (the run may stop as
        ``waiting``). The ``Run`` takes ``checkpoint`` over: read the run
        through it. Once the run moved on since the load (an earlier
        ``open_run``, or a ``save``), the head is loaded again, as ``open``
        would. To load with secrets resolved, use
        ``Run.open(job.store, job.run_id, lease=job.lease, resolve_secrets=...)``.
        """
        loaded, self._loaded = self._loaded, None
        return Run._from_loaded(self.store, self.lease, loaded, reconcile)

    @property
    def stopping(self) -> bool:
        """True once the worker was asked to stop or the lease was lost: finish the step and return."""
        return self._stop.is_set() or self.lost.is_set()

    def save(self, checkpoint: Checkpoint) -> CheckpointInfo:
        """Save under this job's lease; ``LeaseLost`` if another worker took the run over.

        ``StoreUnavailable`` is retried (``safepoint.retrying``); a save whose
        commit was in doubt is checked against the stored digest first, so
        it is never written twice.
        """
        self._loaded = None
        return retrying.save(self.store, checkpoint, self.lease, policy=self.retry)


Handler = Callable[[Job], Status | None]
