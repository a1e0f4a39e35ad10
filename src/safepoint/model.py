"""What a checkpoint is: its fields, defined once, and how one is copied — no I/O here.

What the store says *about* runs and checkpoints (history entries, run rows,
leases, retention) is ``safepoint.records``.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from . import codec
from .errors import InvalidArgument, InvalidCheckpoint
from .messagelist import MessageList, StoredView, thaw

JSONDict = dict[str, Any]


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


# ----------------------------------------------------------------------------
# What one save scrubbed, as a checkpoint carries it (``Checkpoint.scrub_report``): counts, never values.
#
# The store sets it when it saves or loads a checkpoint; the header keeps it
# (``to_json``) only when the scrubber replaced something.


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


@dataclass(frozen=True, slots=True)
class ParentRef:
    """Where a forked run came from."""

    run_id: str
    step: int


# A checkpoint's fields in groups, defined once: what copies, migrates, exports
# or compares checkpoints field by field reads these instead of spelling them out.
IDENTITY_FIELDS = ("run_id", "step")
# The field table of the value fields: free-form JSON (nested to any depth), each
# with the types its top may have. A save validates, scrubs, escapes, offloads and
# stores every field named here, and a load types, inlines, migrates and resolves
# it, all from this table (messages are walked one by one): adding a value field
# is its row here and its attribute below, in the same order (docs/architecture.md).
VALUE_TYPES: dict[str, tuple[type, ...]] = {
    "pending_action": (dict, type(None)),
    "cursors": (dict,),
    "state": (dict,),
}
VALUE_FIELDS = tuple(VALUE_TYPES)
# What a run carries from one step to the next: ``next`` copies these.
CONTENT_FIELDS = ("schema_version", "messages", "counters", *VALUE_FIELDS, "status", "labels", "parent")
# What a migration may change (the chain checks each keeps its type; the store
# takes them from the migrated dict): the content, but for the fork parent.
MIGRATED_FIELDS = tuple(name for name in CONTENT_FIELDS if name != "parent")
# What the store sets when it saves or loads the checkpoint, never the caller.
STORE_FIELDS = ("created_at", "digest", "scrub_report")
FIELDS = (*IDENTITY_FIELDS, *CONTENT_FIELDS, *STORE_FIELDS)  # the dataclass's order
# Every field as ``to_dict`` gives it (all but the scrub report) and the types it
# may have there: what a fixture's import and a migration's result are held to.
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "step": (int,),
    "schema_version": (int,),
    "messages": (list,),
    "counters": (dict,),
    **VALUE_TYPES,
    "status": (str,),
    "labels": (dict,),
    "parent": (dict, type(None)),
    "created_at": (str, type(None)),
    "digest": (str, type(None)),
}
# How a field not given to ``evolve`` is copied so the copy shares nothing
# mutable with the original (messages have their own rule; the rest is immutable).
_COPIES: dict[str, Any] = {"counters": dict, "labels": dict, **dict.fromkeys(VALUE_FIELDS, thaw)}


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
            old = self.__dict__.get("messages")
            value = _retracked(value, old.stored if isinstance(old, MessageList) else None)
        elif name == "status" and not isinstance(value, Status):
            value = _status(value)
        object.__setattr__(self, name, value)

    @property
    def stored_view(self) -> StoredView | None:
        """What the last save or load of this object persisted (internal)."""
        messages = self.messages
        return messages.stored if isinstance(messages, MessageList) else None

    def evolve(self, **changes: Any) -> Checkpoint:
        """A copy with ``changes`` (fields by name) applied; this checkpoint is left as it is.

        Fields not given are copied as ``next`` copies them: stored messages
        are shared (they are immutable) with what this object knows the store
        holds, the rest is copied, so changing the copy never alters this one;
        ``created_at``, ``digest`` and ``scrub_report`` are kept. Values given
        are used as they are. ``messages`` given as a ``MessageList`` is taken
        as it is; any other list as an assignment to ``cp.messages``: it keeps
        this checkpoint's stored view but trusts none of it, so the next save
        compares every message with what is stored. ``InvalidArgument`` names
        a field a checkpoint does not have.
        """
        unknown = changes.keys() - set(FIELDS)
        if unknown:
            raise InvalidArgument(f"a Checkpoint has no field {', '.join(sorted(map(repr, unknown)))}")
        messages = self.messages
        assert isinstance(messages, MessageList)  # __setattr__ keeps it one
        if "messages" not in changes:
            copied = MessageList(messages, messages.stored)
            copied.clean_prefix = messages.clean_prefix
        else:
            given = changes["messages"]
            copied = given if isinstance(given, MessageList) else _retracked(given, messages.stored)
        values = {name: changes[name] if name in changes else getattr(self, name) for name in FIELDS}
        for name, copy in _COPIES.items():
            if name not in changes:
                values[name] = copy(values[name])
        values["messages"] = copied
        return Checkpoint(**values)

    def next(self) -> Checkpoint:
        """A copy at ``step + 1``, ready to be changed and saved as the next step.

        Stored messages are shared (they are immutable); everything else is
        copied, so changing the new checkpoint never alters this one.
        """
        return self.evolve(step=self.step + 1, created_at=None, digest=None, scrub_report=ScrubReport())

    def to_dict(self) -> JSONDict:
        """Plain data (JSON-compatible) — what ``safepoint show --json`` prints.

        Every field but ``scrub_report``; ``from_dict`` is its inverse.
        """
        return {
            "run_id": self.run_id,
            "step": self.step,
            "schema_version": self.schema_version,
            "status": str(self.status),
            "messages": thaw(list(self.messages)),
            "counters": dict(self.counters),
            **{name: thaw(getattr(self, name)) for name in VALUE_FIELDS},
            "labels": dict(self.labels),
            "parent": None
            if self.parent is None
            else {"run_id": self.parent.run_id, "step": self.parent.step},
            "created_at": None if self.created_at is None else self.created_at.isoformat(),
            "digest": self.digest,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Checkpoint:
        """The checkpoint ``data`` describes, in the shape ``to_dict`` returns — its inverse.

        ``from_dict(cp.to_dict())`` has every field of ``cp`` (``scrub_report``,
        which ``to_dict`` leaves out, comes back empty). Values are copied, so
        the checkpoint shares nothing with ``data``. Its messages carry no
        stored view: it is a checkpoint this object never saved, like one
        built field by field. ``created_at`` and ``digest`` may be missing
        (None); every other field must be there. Values are checked when the
        checkpoint is saved, as for any checkpoint; ``InvalidCheckpoint`` here
        names a missing or unknown field, or a ``status``, ``parent`` or
        ``created_at`` not in ``to_dict``'s shape.
        """
        if not isinstance(data, Mapping):
            raise InvalidCheckpoint(f"a checkpoint dict is a mapping, not a {type(data).__name__}")
        for position, key in enumerate(data):
            if key not in _DICT_FIELDS:
                raise InvalidCheckpoint(
                    f"a checkpoint has no field {codec.key_segment(key, position, dotted=False)}"
                )
        missing = [name for name in _REQUIRED_DICT_FIELDS if name not in data]
        if missing:
            raise InvalidCheckpoint(f"the checkpoint dict has no {', '.join(map(repr, missing))}")
        values = {name: thaw(data[name]) for name in _DICT_FIELDS if name in data}
        messages = values["messages"]
        if isinstance(messages, tuple):  # a list already is a copy; a str or dict is refused below
            values["messages"] = [thaw(m) for m in messages]
        values["parent"] = _parent(values["parent"])
        values["created_at"] = _moment(values.get("created_at"))
        return cls(**values)


# to_dict's keys: every field but the scrub report; the store's own may be missing.
_DICT_FIELDS = frozenset(FIELD_TYPES)
_REQUIRED_DICT_FIELDS = tuple(name for name in FIELDS if name in _DICT_FIELDS - set(STORE_FIELDS))


def value_default(name: str) -> Any:
    """A fresh copy of value field ``name``'s default (what a header saved before it was added holds)."""
    spec = Checkpoint.__dataclass_fields__[name]
    return spec.default if spec.default_factory is MISSING else spec.default_factory()


def _retracked(value: Any, stored: StoredView | None) -> MessageList:
    """``value`` assigned as a checkpoint's messages: tracked against the view
    the checkpoint had, with nothing of it trusted (the next save compares)."""
    if not isinstance(value, list | tuple):
        # A str, a dict or a generator would be taken apart silently.
        raise InvalidCheckpoint(f"messages must be a list of dicts, not {type(value).__name__}")
    tracked = MessageList(value, stored)
    tracked.clean_prefix = 0
    return tracked


def _parent(value: Any) -> ParentRef | None:
    """``to_dict``'s parent (None or ``{"run_id": …, "step": …}``) as a ParentRef."""
    if value is None:
        return None
    if (
        isinstance(value, dict)
        and value.keys() == {"run_id", "step"}
        and type(value["run_id"]) is str
        and type(value["step"]) is int
    ):
        return ParentRef(value["run_id"], value["step"])
    raise InvalidCheckpoint("parent must be None or a dict of a str run_id and an int step")


def _moment(value: Any) -> datetime | None:
    """``to_dict``'s created_at (None or ISO 8601 text) as a datetime."""
    if value is None:
        return None
    if type(value) is str:
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    raise InvalidCheckpoint("created_at must be None or an ISO 8601 date and time")


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
