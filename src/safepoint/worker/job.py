"""``Job``: one claimed run, as a ``Worker``'s handler sees it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from safepoint import retrying
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

    @property
    def run_id(self) -> str:
        return self.lease.run_id

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
        return retrying.save(self.store, checkpoint, self.lease, policy=self.retry)


Handler = Callable[[Job], Status | None]
