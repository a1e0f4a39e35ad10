"""The attempt policy: what a worker does with a run that did not end cleanly.

Every claim counts an attempt. A run whose handler raised, or that could not
be loaded (corrupt, a migration that raises), is a *failed attempt*: it goes
back to the queue with ``retry_at = now + backoff * 2**(attempts - 1)``, and
at ``max_attempts`` it is quarantined instead — released as ``failed`` with
``last_error``, the exception's type and its own message, scrubbed and
truncated (``recorded_error``). A fault of the store or of the deploy
(``StoreUnavailable``, ``SchemaTooNew``) or a handler that gave the run back
is not the run's fault: it goes back with its attempt uncounted
(``GIVE_BACK``). A clean outcome resets the count (``finished``).

Each decision is a ``Release``: the arguments of the lease's release.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from safepoint.model import Status
from safepoint.records import Lease
from safepoint.scrub import Scrubber
from safepoint.store import Attempts
from safepoint.visible import visible

ERROR_LEN = 500  # characters of last_error kept: enough to tell causes apart


@dataclass(frozen=True, slots=True)
class Release:
    """How a run goes back to the store: its status (None: still running), whether it is
    queued again, what happens to its attempt count, when it may be claimed again
    (microseconds since the epoch) and the error recorded with it."""

    status: Status | None
    requeue: bool
    attempts: Attempts = "keep"
    retry_at: int | None = None
    error: str | None = None


# Not the run's fault (an outage, newer code's checkpoint, a handler that gave it back):
# back to the queue, the attempt uncounted.
GIVE_BACK = Release(None, requeue=True, attempts="uncount")


def finished(status: Status) -> Release:
    """A clean outcome: released with the handler's status, the attempt count reset."""
    return Release(status, requeue=False, attempts="reset")


@dataclass(frozen=True, slots=True)
class AttemptPolicy:
    """``max_attempts`` claims of one run without a clean outcome quarantine it; ``backoff``
    seconds, doubling per attempt, pass between them."""

    max_attempts: int
    backoff: float

    def quarantines(self, lease: Lease) -> bool:
        """True when the failed attempt under ``lease`` was the run's last."""
        return lease.attempts >= self.max_attempts

    def failed(self, lease: Lease, error: str) -> Release:
        """A failed attempt: back to the queue after the backoff, or quarantined as ``failed``."""
        if self.quarantines(lease):
            return Release(Status.FAILED, requeue=False, error=error)
        delay = self.backoff * 2 ** max(lease.attempts - 1, 0)
        retry_at = time.time_ns() // 1000 + int(delay * 1_000_000)
        return Release(None, requeue=True, retry_at=retry_at, error=error)


def recorded_error(exc: BaseException, scrubber: Scrubber | None) -> str:
    """``Type: message`` — the exception's own words, scrubbed and truncated."""
    text = f"{type(exc).__name__}: {exc}"
    if scrubber is not None:
        text = scrubber.scrub_text(text)
    return visible(text, max_len=ERROR_LEN)
