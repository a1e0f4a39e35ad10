"""What the store says about runs and checkpoints: history entries, run rows,
leases, retention and listing pages — and the integer time they are kept in. No I/O.

The checkpoint itself (what an application saves) is ``safepoint.model``.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import repeat
from operator import call
from typing import Any, Generic, TypeVar

from .errors import CorruptCheckpoint, InvalidArgument
from .model import JSONDict, ParentRef, ScrubReport, Status

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """One entry of a run's history: the header, without the messages."""

    run_id: str
    step: int
    schema_version: int
    status: Status
    created_at: datetime
    message_count: int
    digest: str
    scrub_report: ScrubReport = field(default_factory=ScrubReport)


@dataclass(frozen=True, slots=True)
class RunCounts:
    """How many runs the store holds by status, and how many are queued, leased, and leased with
    the lease running out within ``Store.run_counts``'s ``soon``."""

    by_status: dict[str, int]
    queued: int
    leased: int
    expiring: int


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    """One checkpoint of a run as a chart sees it: its counters and the bytes its row stores.

    ``pending_action`` is as stored (references, escaped keys and all): for
    display; ``load`` gives the action itself."""

    step: int
    created_at: datetime
    message_count: int
    counters: dict[str, int | float]
    stored_bytes: int
    pending_action: Any = None


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One run as the store knows it (its latest checkpoint's summary).

    ``labels`` are the run row's copy, which listings read (``runs(labels=…)``
    filters on it). A run's labels are stored twice: in every checkpoint's
    header, as that step saved them, and on the run row. The run row's copy is
    overwritten, whole, by the labels of each checkpoint the run saves (after
    scrubbing, as in the header) — no merge: a save whose checkpoint has other
    labels, or none, replaces them silently. A fork writes the forked
    checkpoint's labels (``fork(labels=…)`` replaces the source's, it does not
    add to them), and ``safepoint migrate`` those of the migrated head. So
    ``labels`` equals the head checkpoint's, while ``load(run_id, step)`` of an
    older step returns the labels that step was saved with; a migration applied
    on load changes only the loaded copy, until the next save.
    """

    run_id: str
    status: Status
    head_step: int
    schema_version: int
    labels: dict[str, str]
    counters: dict[str, int | float]
    created_at: datetime
    updated_at: datetime
    parent: ParentRef | None
    # Worker attempts (see ``Worker``): claims since the last clean outcome or
    # ``requeue``; when the run may be claimed again after a failed attempt;
    # and that attempt's error — the exception's type and its own message,
    # scrubbed and truncated, never a stored value.
    attempts: int = 0
    retry_at: datetime | None = None
    last_error: str | None = None
    # Set when the run's row could not be read (a damaged or unopenable value):
    # the error's class name (``"CorruptCheckpoint"``, ``"MissingKey"`` …).
    # A listing shows such a run rather than failing for every run; its other
    # fields then hold only what could be read: status, head step and times
    # when they are what a save writes (else failed, -1 and the epoch), labels
    # and counters empty, no parent.
    unreadable: str | None = None


@dataclass(frozen=True, slots=True)
class StatusOrigin:
    """What set the run row's status (``Store.status_origin``; ``safepoint verify`` checks it).

    A save sets the run row's status to its checkpoint's, which the
    checkpoint's digest covers. A worker's ``release`` with a status,
    ``requeue`` of a failed run and ``cancel`` set it without a checkpoint,
    and record the change until the next save. ``set_by`` names that
    operation (``"release"``, ``"requeue"``, ``"cancel"``; ``"upgrade"`` for a
    status that differed when the store was upgraded) when the record is
    current — made under the run's present lease epoch, naming ``status`` —
    and is None otherwise: the status must then be the head checkpoint's.
    ``status`` is the run row's, as stored.
    """

    run_id: str
    status: str
    set_by: str | None


MAX_KEEP_LAST = 2**31 - 1  # a step count: see store.validate.MAX_STEP
MAX_AGE = timedelta(days=36_500)  # durations of retention and GC grace: a century is plenty
_NO_TIME = timedelta(0)


@dataclass(frozen=True, slots=True)
class Retention:
    """Which checkpoints a run keeps; the rest are pruned by ``store.prune()`` / ``safepoint gc``.

    ``keep_last`` keeps the newest N checkpoints, ``keep_for`` those younger
    than a duration (both given: either suffices); the latest checkpoint is
    always kept, and with neither every checkpoint is. ``delete_finished_after``
    deletes a run that is done, failed or cancelled once its last checkpoint
    is older than that. Set per store (``open_store(url, retention=…)``) or per
    run (``store.set_retention(run_id, …)``, which wins).
    """

    keep_last: int | None = None
    keep_for: timedelta | None = None
    delete_finished_after: timedelta | None = None

    def __post_init__(self) -> None:
        keep_last = self.keep_last
        if keep_last is not None and (type(keep_last) is not int or not 1 <= keep_last <= MAX_KEEP_LAST):
            raise InvalidArgument(f"keep_last must be None or an int from 1 to {MAX_KEEP_LAST}")
        for name in ("keep_for", "delete_finished_after"):
            value = getattr(self, name)
            # Bounded so that ``now - value`` is still a date (timedelta.max is not).
            if value is not None and (not isinstance(value, timedelta) or not _NO_TIME <= value <= MAX_AGE):
                raise InvalidArgument(f"{name} must be None or a timedelta from 0 to {MAX_AGE.days} days")

    def to_json(self) -> JSONDict:
        def seconds(value: timedelta | None) -> float | None:
            return None if value is None else value.total_seconds()

        return {
            "keep_last": self.keep_last,
            "keep_for": seconds(self.keep_for),
            "delete_finished_after": seconds(self.delete_finished_after),
        }

    @classmethod
    def from_json(cls, data: JSONDict) -> Retention:
        def duration(value: float | None) -> timedelta | None:
            return None if value is None else timedelta(seconds=value)

        return cls(
            keep_last=data.get("keep_last"),
            keep_for=duration(data.get("keep_for")),
            delete_finished_after=duration(data.get("delete_finished_after")),
        )


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker's time-limited, fenced ownership of a run.

    ``epoch`` increases on every claim of the run; saves made with this lease
    are accepted only while it is still the run's current epoch.
    """

    run_id: str
    worker_id: str
    epoch: int
    expires_at: datetime
    duration: float  # seconds; heartbeats extend the lease by this much
    attempts: int = 0  # claims of the run so far, this one included (reset by a clean outcome)
    # The run row's status as the claim found it (None: not from a claim). A worker's
    # ``job.open_run()`` reads it instead of the row: a quarantined run stays failed.
    run_status: Status | None = None


@dataclass(frozen=True, slots=True)
class CallUsage:
    """What one recorded call cost, as its caller measured it when it was made: tokens and spend.

    Stored with the call's entry, so a run's counters can be told from its
    journal (one count per recorded call), never from a replayed response."""

    tokens_in: int = 0
    tokens_out: int = 0
    spend: float = 0.0


@dataclass(frozen=True, slots=True)
class Recorded:
    """One entry of a run's call journal (``Store.record_call``, ``call_intent``, ``recorded_call``).

    ``state`` is ``"intent"`` (written before a non-idempotent effect, or a
    model request in flight: nothing recorded yet) or ``"done"`` (``result``
    holds what the call returned, as stored: secret references and all,
    unless read with ``resolve_secrets``). ``step`` is the step whose
    checkpoint covers the entry (the run's head + 1 when it was written).
    ``same_request`` says whether the entry's request digest equals the
    request the reader passed (None when the reader passed none, or the
    entry has none). ``writer`` and ``epoch`` name the lease that wrote the
    intent (None without one); ``writer_live`` whether that lease is still
    the run's current one and unexpired when the entry was read.
    ``written``: this call wrote the entry (``record_call``/``call_intent``
    found none before it). ``redacted``: how many values of the result the
    scrubber's rules replaced by markers when it was recorded (a secret
    reference, which ``resolve_secrets`` gives back, is not counted): the
    result replays redacted.
    """

    run_id: str
    key: str
    step: int
    state: str
    result: Any = None
    usage: CallUsage | None = None
    same_request: bool | None = None
    writer: str | None = None
    epoch: int | None = None
    writer_live: bool = False
    created_at: datetime | None = None
    done_at: datetime | None = None
    written: bool = False
    redacted: int = 0

    @property
    def done(self) -> bool:
        return self.state == "done"


@dataclass(frozen=True, slots=True)
class CallCopy:
    """One journal entry as ``export`` carries it and ``import`` writes it back
    (``Store.export_calls``, ``Store.import_calls``).

    ``entry``: the entry, its result as stored (secret references as
    references, large values put back inline). ``request_digest``: the plain
    digest of the request it was recorded for (None: recorded without one).
    ``request_known`` is False when the store could not give the digest back:
    an encrypted store holds only a digest keyed under its index key. Import
    then writes a digest no request matches, so the copy is shown but never
    replayed for a request it cannot be compared with.
    """

    entry: Recorded
    request_digest: bytes | None = None
    request_known: bool = True


@dataclass(frozen=True, slots=True)
class CallsVerified:
    """What ``Store.verify_calls`` found for one run: how many entries it checked, a
    ``CorruptCall`` for each damaged one (run, step and key; never its result), and a
    ``CorruptCheckpoint`` for each step whose checkpoint covers more or fewer entries
    than are stored (one deleted, or moved between steps). Ordered by step."""

    checked: int
    damaged: list[CorruptCheckpoint] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Page(Generic[_T]):
    """One page of a listing; pass ``next_cursor`` back to get the next page."""

    items: Sequence[_T]
    next_cursor: str | None

    def __iter__(self) -> Iterator[_T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True, slots=True)
class CounterSums:
    """``store.counter_sums``: the runs' head counters summed per UTC hour of their last update.

    ``hours`` holds (the hour's start, runs, each counter's sum), oldest first;
    only int and float counters are summed. ``unreadable`` counts the runs
    whose counters cannot be read (they are in no hour).
    """

    hours: list[tuple[datetime, int, dict[str, float]]]
    unreadable: int


def now_micros() -> int:
    """Now, in the store's unit: microseconds since the epoch, UTC (every store call's clock)."""
    return time.time_ns() // 1000


def from_micros(micros: int) -> datetime:
    """UTC datetime from integer microseconds since the epoch (how stores keep time)."""
    return _EPOCH + timedelta(microseconds=micros)


def to_micros(moment: datetime) -> int:
    """Integer microseconds since the epoch; naive datetimes are taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1)


# A save returns a CheckpointInfo every time: its frozen dataclass __init__ sets each field with
# object.__setattr__ from Python bytecode (about 1.3 K instructions a field). The slots' own
# setters, called by map in C, fill the same frozen record with no Python frame per field.
_INFO_SETTERS = tuple(getattr(CheckpointInfo, name).__set__ for name in CheckpointInfo.__slots__)


def checkpoint_info(*values: Any) -> CheckpointInfo:
    """``CheckpointInfo(*values)`` with every field given, in the class's order, cheaper."""
    info = object.__new__(CheckpointInfo)
    deque(map(call, _INFO_SETTERS, repeat(info), values), 0)
    return info
