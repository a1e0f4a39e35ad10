"""The attempt policy: what a worker does with a run that did not end cleanly.

Every claim counts an attempt. Whose fault the error was decides the rest
(``fault``):

* the store's (``StoreUnavailable``: an outage; ``StoreReadOnly``: the
  store took no write, a hot standby) or a handler that gave the run back:
  back to the queue at once, the attempt uncounted (``GIVE_BACK``);
* this worker's: the run was saved by newer code (``SchemaTooNew``), or it
  is sealed under a key this worker's keyring lacks or cannot use
  (``MissingKey``, ``EncryptedStore``, ``InvalidKey``): back uncounted and
  *held* for ``HOLD_LEASES`` lease periods (``held``), so that this worker
  moves on instead of claiming it again at once, and a worker that can read
  it takes it after;
* the stored row's: it fails its digest (``CorruptCheckpoint`` of this run),
  and the store's keys passed the open check, so the keys are not the cause:
  reading it again reads the same bytes, so it is quarantined at once
  (``quarantined``);
* anything else (a handler that raised, a migration that raised) is a
  *failed attempt*: back to the queue with ``retry_at = now + backoff *
  2**(attempts - 1)``, and at ``max_attempts`` quarantined instead.

Quarantined is released as ``failed`` with ``last_error``, the exception's
type and its own message, scrubbed and truncated (``recorded_error``). A
clean outcome resets the count (``finished``).

Each decision is a ``Release``: the arguments of the lease's release.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from safepoint.errors import (
    CorruptCheckpoint,
    InvalidKey,
    MissingKey,
    SchemaTooNew,
    StoreReadOnly,
    StoreUnavailable,
)
from safepoint.model import Status
from safepoint.records import Lease
from safepoint.scrub import Scrubber
from safepoint.store import Attempts
from safepoint.visible import visible

# Characters of an error shown in a log line: as many as Store.release keeps of it as the
# run's last_error (enough to tell causes apart), so what is logged is what is recorded.
ERROR_LEN = 500
# How long a run this worker cannot read is held back, in lease periods: past one,
# so that a worker draining the queue (``stop_when_idle``) stops instead of
# waiting for it; not much more, since a worker that can read it waits as long.
HOLD_LEASES = 2

Fault = Literal["store", "worker", "row", "attempt"]


@dataclass(frozen=True, slots=True)
class Release:
    """How a run goes back to the store: ``Store.release``'s arguments — its status (None:
    still running), whether it is queued again, what happens to its attempt count, when it
    may be claimed again and the error recorded with it."""

    status: Status | None
    requeue: bool
    attempts: Attempts = "keep"
    retry_at: datetime | None = None
    error: str | None = None


# Not the run's fault (an outage, a handler that gave it back): back to the queue at
# once, the attempt uncounted.
GIVE_BACK = Release(None, requeue=True, attempts="uncount")


def fault(exc: BaseException, run_id: str, *, keys_checked: bool) -> Fault:
    """Whose fault ``exc``, met while working on run ``run_id``, was (see the module's docstring).

    ``keys_checked``: the store is not encrypted, or its keys passed the open
    check. Without that, a failed digest may be a wrong index key's doing
    (every run would fail alike), so it is held back, never quarantined.
    """
    if isinstance(exc, StoreUnavailable | StoreReadOnly):
        return "store"
    if isinstance(exc, SchemaTooNew | MissingKey | InvalidKey):
        return "worker"
    if isinstance(exc, CorruptCheckpoint) and exc.run_id == run_id:
        return "row" if keys_checked else "worker"
    return "attempt"  # another run's corruption met by the handler is its attempt's failure


def held(lease_seconds: float, error: str) -> Release:
    """The worker's fault: back to the queue uncounted, not claimable for ``HOLD_LEASES``
    periods of ``lease_seconds``."""
    retry_at = _after(HOLD_LEASES * lease_seconds)
    return Release(None, requeue=True, attempts="uncount", retry_at=retry_at, error=error)


def quarantined(error: str) -> Release:
    """Released as ``failed`` with ``error``, out of the queue until ``requeue``."""
    return Release(Status.FAILED, requeue=False, error=error)


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
            return quarantined(error)
        delay = self.backoff * 2 ** max(lease.attempts - 1, 0)
        return Release(None, requeue=True, retry_at=_after(delay), error=error)


def _after(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def recorded_error(exc: BaseException, scrubber: Scrubber | None) -> str:
    """``Type: message`` — the exception's own words, scrubbed and truncated: for the log
    line, and as the release's ``error`` (which the store scrubs and cuts alike again,
    changing nothing: already done)."""
    text = f"{type(exc).__name__}: {exc}"
    if scrubber is not None:
        text = scrubber.scrub_text(text)
    return visible(text, max_len=ERROR_LEN)
