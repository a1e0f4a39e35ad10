"""What a checkpoint is, and what the store says about runs — no I/O here."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Generic, TypeVar

from .errors import InvalidArgument, InvalidCheckpoint
from .messagelist import MessageList, StoredView, thaw

JSONDict = dict[str, Any]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_T = TypeVar("_T")


class Status(StrEnum):
    """Where a run stands. Stored with every checkpoint and on the run row."""

    RUNNING = "running"
    WAITING = "waiting"  # paused for human input
    PAUSED = "paused"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


def new_run_id() -> str:
    """A fresh, unique run id (a UUID4 string)."""
    return str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class ParentRef:
    """Where a forked run came from."""

    run_id: str
    step: int


@dataclass(frozen=True, slots=True)
class ScrubReport:
    """What one save scrubbed: counts by rule and field path — never values."""

    counts: tuple[tuple[str, str, int], ...] = ()  # (rule, path, count), sorted

    @property
    def total(self) -> int:
        return sum(count for _, _, count in self.counts)

    def by_rule(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for rule, _, count in self.counts:
            out[rule] += count
        return dict(sorted(out.items()))

    def __bool__(self) -> bool:
        return bool(self.counts)

    def to_json(self) -> list[list[Any]]:
        return [[rule, path, count] for rule, path, count in self.counts]

    @classmethod
    def from_json(cls, data: Any) -> ScrubReport:
        return cls(tuple((str(r), str(p), int(c)) for r, p, c in data or ()))

    @classmethod
    def merge(cls, counters: Iterable[Counter[tuple[str, str]]]) -> ScrubReport:
        total: Counter[tuple[str, str]] = Counter()
        for counter in counters:
            if counter:  # most saves find nothing: skip Counter.update's own overhead
                total.update(counter)
        if not total:
            return _EMPTY_REPORT
        return cls(tuple(sorted((rule, path, n) for (rule, path), n in total.items())))


_EMPTY_REPORT = ScrubReport()


@dataclass(kw_only=True, eq=False)
class Checkpoint:
    """The complete snapshot of a run at one step boundary.

    Build one for a new run (``step`` 0), save it, then keep the same object
    going — ``cp.step += 1`` or ``cp = cp.next()`` — and save again. The
    object carries what its last save persisted, so the next save writes only
    the new messages. All values must be plain JSON data.

    ``created_at``, ``digest`` and ``scrub_report`` (what the scrubber
    replaced in the stored copy: counts by rule and path, never values) are
    set by the store when it saves or loads.
    """

    run_id: str = field(default_factory=new_run_id)
    step: int = 0
    schema_version: int = 1
    messages: list[JSONDict] = field(default_factory=list)
    counters: dict[str, int | float] = field(default_factory=dict)
    pending_action: JSONDict | None = None
    cursors: JSONDict = field(default_factory=dict)
    state: JSONDict = field(default_factory=dict)
    status: Status = Status.RUNNING
    labels: dict[str, str] = field(default_factory=dict)
    parent: ParentRef | None = None
    created_at: datetime | None = None
    digest: str | None = None
    scrub_report: ScrubReport = field(default_factory=ScrubReport)

    def __setattr__(self, name: str, value: Any) -> None:
        # Keep messages a tracked MessageList even when a new list is assigned:
        # the store then compares it against what it holds to find the delta.
        if name == "messages" and not isinstance(value, MessageList):
            if not isinstance(value, list | tuple):
                # A str, a dict or a generator would be taken apart silently.
                raise InvalidCheckpoint(f"messages must be a list of dicts, not {type(value).__name__}")
            old = self.__dict__.get("messages")
            stored = old.stored if isinstance(old, MessageList) else None
            tracked = MessageList(value, stored)
            tracked.clean_prefix = 0
            value = tracked
        elif name == "status" and not isinstance(value, Status):
            value = _status(value)
        object.__setattr__(self, name, value)

    @property
    def stored_view(self) -> StoredView | None:
        """What the last save or load of this object persisted (internal)."""
        messages = self.messages
        return messages.stored if isinstance(messages, MessageList) else None

    def next(self) -> Checkpoint:
        """A copy at ``step + 1``, ready to be changed and saved as the next step.

        Stored messages are shared (they are immutable); everything else is
        copied, so changing the new checkpoint never alters this one.
        """
        messages = self.messages
        assert isinstance(messages, MessageList)  # __setattr__ keeps it one
        copied = MessageList(messages, messages.stored)
        copied.clean_prefix = messages.clean_prefix
        return Checkpoint(
            run_id=self.run_id,
            step=self.step + 1,
            schema_version=self.schema_version,
            messages=copied,
            counters=dict(self.counters),
            pending_action=thaw(self.pending_action),
            cursors=thaw(self.cursors),
            state=thaw(self.state),
            status=self.status,
            labels=dict(self.labels),
            parent=self.parent,
        )

    def to_dict(self) -> JSONDict:
        """Plain data (JSON-compatible) — what ``safepoint show --json`` prints."""
        return {
            "run_id": self.run_id,
            "step": self.step,
            "schema_version": self.schema_version,
            "status": str(self.status),
            "messages": thaw(list(self.messages)),
            "counters": dict(self.counters),
            "pending_action": thaw(self.pending_action),
            "cursors": thaw(self.cursors),
            "state": thaw(self.state),
            "labels": dict(self.labels),
            "parent": None
            if self.parent is None
            else {"run_id": self.parent.run_id, "step": self.parent.step},
            "created_at": None if self.created_at is None else self.created_at.isoformat(),
            "digest": self.digest,
        }


def _status(value: Any) -> Status:
    """``value`` as a Status; ``InvalidCheckpoint`` (naming the known ones, not the value) otherwise."""
    if type(value) is str:
        try:
            return Status(value)
        except ValueError:
            pass
    known = ", ".join(s.value for s in Status)
    raise InvalidCheckpoint(
        f"status must be a Status or the value of one ({known}); this {type(value).__name__} is neither"
    )


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
class RunInfo:
    """One run as the store knows it (its latest checkpoint's summary)."""

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


MAX_KEEP_LAST = 2**31 - 1  # a step count: see store.serialize.MAX_STEP
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


@dataclass(frozen=True, slots=True)
class Page(Generic[_T]):
    """One page of a listing; pass ``next_cursor`` back to get the next page."""

    items: Sequence[_T]
    next_cursor: str | None

    def __iter__(self) -> Iterator[_T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def from_micros(micros: int) -> datetime:
    """UTC datetime from integer microseconds since the epoch (how stores keep time)."""
    return _EPOCH + timedelta(microseconds=micros)


def to_micros(moment: datetime) -> int:
    """Integer microseconds since the epoch; naive datetimes are taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1)
