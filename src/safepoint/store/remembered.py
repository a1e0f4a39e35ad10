"""What a store remembers of the runs it saved, so a fresh checkpoint saves in O(new).

A harness that builds a new ``Checkpoint`` every step — ``messages=list(conversation)``,
or ``asdict()`` of its own dataclass, which deep-copies — hands the store a
list it never loaded or saved. The delta (``delta.py``) would then have to
scrub and encode every message and compare it with the stored ones, and read
the head's bodies to do so: a save at step 1000 would cost as much as the
whole history. ``RunMemory`` spares that.

For each run this store saved, it keeps the head's ``StoredView`` and a
snapshot of its messages *as the caller gave them* (before scrubbing): the
frozen copies ``delta.finish_save`` puts in the checkpoint anyway
(``messagelist.freeze``), so remembering them costs no copy. A caller that
edits one of its own dicts in place after the save does not reach the
snapshot. A fresh save's messages are compared with the snapshot by ``==``:
one comparison of two lists, which Python runs in C, message by message and
string by string (at once when the strings are the same objects, as they are
in a list or deep copy), with no encoding and no hashing.

``==`` is JSON's equality only where the snapshot's values are all strings
(and ``None``): ``1 == 1.0 == True`` and ``0.0 == -0.0`` are not the same
JSON. So the messages whose snapshot holds anything else (numbers, booleans,
the store's references) are listed as *typed*, and those the ``==`` passed
are compared once more as JSON (both sides encoded, one call each for all of
them). Like a tracked list's clean prefix, a message recognised here is not
scrubbed or validated again (a secret registered after it was stored is not
looked for in it); what it is recognised as is a message equal to one the
store holds — the leniency JSON has too (a ``str`` subclass and its text,
a ``dict`` subclass and its items), plus objects whose own ``__eq__`` claims
equality with a stored string.

Lazy where the usual save is concerned: a save of a checkpoint the store
tracks (in place: its own list, only appended to) never compares anything, so
remembering it only appends its frozen new messages and their stored lengths to
the run's ``Snapshot`` and moves the run's entry on to its head. Which messages
are typed, and where their stored bytes end, is worked out (``Snapshot.settle``)
when a fresh save first compares against them, once for each message.

A hint, never trusted alone: the save plans against the remembered view and
``ops.save`` checks that view against the run's head inside its transaction,
redoing the plan exactly when another writer moved the head. Bounded:
``MAX_MESSAGES`` messages and ``MAX_BYTES`` of their stored bodies over
``MAX_RUNS`` runs, the least recently saved forgotten first (the snapshot
shares its strings with the caller's own messages while the caller holds
them; it keeps them alive after); a longer run is compared exactly. A forked
child starts with an empty memory and its own lock.
"""

from __future__ import annotations

import os
import threading
import weakref
from array import array
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass
from itertools import accumulate, islice
from typing import TYPE_CHECKING, Any

import orjson

from safepoint import long_text
from safepoint.messagelist import FrozenDict, FrozenList, MessageList, StoredView, freeze

if TYPE_CHECKING:
    from .delta import MessagePlan

MAX_MESSAGES = 262_144
MAX_BYTES = 256 * 1024 * 1024  # the snapshot's messages, as stored
MAX_RUNS = 4_096
# What a snapshot's value may be for ``==`` to be JSON's equality.
_PLAIN = frozenset({str, type(None)})
_DICTS = (FrozenDict, dict)
_LISTS = (FrozenList, list)


def _plain(value: Any) -> bool:
    """Whether ``value`` (a frozen message) holds only dicts, lists, strings and ``None``."""
    kind = type(value)
    if kind in _DICTS:
        children: Any = value.values()
    elif kind in _LISTS:
        children = value
    else:
        return kind in _PLAIN
    # The usual message ({"role": ..., "content": "..."}): one C-level look at its values.
    return _PLAIN.issuperset(map(type, children)) or all(map(_plain, children))


def _agree(given: Any, kept: Any) -> bool:
    """``given == kept``, False when the comparison raises (compared exactly then)."""
    try:
        return bool(kept == given)
    except Exception:
        return False


def _same_json(given: Any, kept: Any, long: bool) -> bool:
    """Whether the two encode to the same JSON (key order kept), False when either cannot."""
    try:
        if long:  # a string longer than long_text's threshold: no worst-case reservation
            return long_text.dumps(given, 0) == long_text.dumps(kept, 0)
        return orjson.dumps(given) == orjson.dumps(kept)
    except TypeError:
        return False


class Snapshot:
    """A run's messages as this store saved them, frozen, shared by the heads remembered
    on it (each sees its first ``view.count``; the usual save extends it in place, as
    ``StoredView.chains`` is). A save only appends to it; what a fresh save's comparison
    needs to know of them (which are not ``_plain``, where their stored bytes end) is
    worked out by ``settle`` when one asks, once for each message, so that a save of a
    checkpoint the store tracks (in place) pays for none of it."""

    __slots__ = ("ends", "items", "lengths", "long", "settled", "typed")

    def __init__(self, items: list[Any], lengths: array[int]) -> None:
        self.items = items  # the frozen messages as given
        self.lengths = lengths  # lengths[i]: the stored bytes of items[i]
        # For the first ``settled`` items: ends[i], the stored bytes of the first i + 1;
        # ``typed``, the ascending indices of those that are not _plain; ``long``, whether
        # one of those holds a string long_text splices.
        self.ends = array("q")
        self.typed: list[int] = []
        self.settled = 0
        self.long = False

    def settle(self) -> None:
        """What is known of every item, worked out for those appended since (under the memory's lock)."""
        start, items = self.settled, self.items
        stop = len(items)
        if start == stop:
            return
        self.ends.extend(
            islice(accumulate(self.lengths[start:stop], initial=self.ends[-1] if start else 0), 1, None)
        )
        new = items[start:stop]
        # The usual new messages are all plain: one map over them, no list of indices built.
        if not all(map(_plain, new)):
            typed = [i for i, m in enumerate(new, start) if not _plain(m)]
            self.typed.extend(typed)
            self.long = self.long or any(long_text.has_long_string(items[i]) for i in typed)
        self.settled = stop

    def prefix(self, count: int) -> Snapshot:
        """A snapshot of the first ``count`` items alone, settled (a head built on an older one)."""
        self.settle()
        kept = Snapshot(self.items[:count], self.lengths[:count])
        kept.ends, kept.settled, kept.long = self.ends[:count], count, self.long
        kept.typed = self.typed[: bisect_left(self.typed, count)]
        return kept


class Remembered:
    """One run's head as this store saved it: its view, the snapshot its messages are
    the first ``view.count`` of, and their stored bytes. The run's entry: a save built
    directly on it moves it on to its own head (``remember``), so read ``view`` once."""

    __slots__ = ("size", "snapshot", "view")

    def __init__(self, view: StoredView, snapshot: Snapshot, size: int) -> None:
        self.view = view
        self.snapshot = snapshot
        self.size = size


# Not frozen: made on every save's path, where frozen's object.__setattr__ per field costs
# more than the rest of the object (about 1.3 K instructions a field). Never changed once made.
@dataclass(slots=True)
class Recall:
    """What one save starts from: ``view``, the head the delta is planned
    against (the checkpoint's own, else the remembered one), whose first
    ``known`` messages are known to be as given; ``base``, the memory it came from."""

    view: StoredView | None
    known: int
    base: Remembered | None = None


class RunMemory:
    """The runs this store saved, by run id (thread-safe, bounded)."""

    def __init__(
        self, max_messages: int = MAX_MESSAGES, max_runs: int = MAX_RUNS, max_bytes: int = MAX_BYTES
    ) -> None:
        self._max_messages = max_messages
        self._max_runs = max_runs
        self._max_bytes = max_bytes
        self._runs: OrderedDict[str, Remembered] = OrderedDict()
        self._messages = 0
        self._bytes = 0
        self._lock = threading.Lock()
        _HOLDERS.add(self)

    def recall(self, run_id: str, step: int, view: StoredView | None, messages: list[Any]) -> Recall:
        """Where a save of ``messages`` as ``run_id``'s ``step`` starts; ``view``
        is the checkpoint's own stored view (None for a fresh checkpoint)."""
        tracked = view is not None and isinstance(messages, MessageList) and messages.stored is view
        known = min(messages.clean_prefix, len(messages)) if tracked else 0  # type: ignore[attr-defined]
        with self._lock:
            base = self._runs.get(run_id)
            if base is None:
                return Recall(view, known)
            self._runs.move_to_end(run_id)
            head = base.view  # read once: the entry moves on with the run's later saves
        if view is not None and head.digest != view.digest:
            return Recall(view, known)
        if view is None:
            if head.step != step - 1:
                return Recall(None, 0)  # not the step after it: nothing to plan against
            view = head
        if known >= view.count:
            return Recall(view, known, base)  # a tracked list, only appended to since
        snapshot = base.snapshot
        with self._lock:
            snapshot.settle()  # what the comparison needs to know of the remembered messages
        return Recall(view, _match(snapshot, view.count, messages, known), base)

    def remember(self, run_id: str, recall: Recall, plan: MessagePlan, messages: Any) -> None:
        """After a commit: ``messages`` (a ``MessageList``, its new messages frozen by
        ``finish_save``) are the run's head, as ``plan`` stored them: planned against
        the view whose digest is ``plan.base``, its first ``plan.keep`` messages kept
        from there and the rest stored as ``plan.bodies``."""
        keep, bodies = plan.keep, plan.bodies
        view = messages.stored
        count = view.count
        if count > self._max_messages:
            self.forget(run_id)
            return
        base = recall.base
        new = messages[keep:]
        if base is not None:
            added = sum(map(len, bodies))
            with self._lock:
                if plan.base == base.view.digest:
                    snapshot = base.snapshot
                    if len(snapshot.items) == keep and self._runs.get(run_id) is base:
                        # The usual save: this head follows the base's directly (``keep`` is
                        # then all of its messages), which is still the head remembered. The
                        # snapshot is extended in place and the entry moves on to this head;
                        # a save planned against the base's head elsewhere then finds another
                        # digest in it, and remembers its run afresh.
                        snapshot.items.extend(new)
                        snapshot.lengths.extend(map(len, bodies))
                        self._messages += count - base.view.count
                        self._bytes += added
                        base.view, base.size = view, base.size + added
                        if self._messages > self._max_messages or self._bytes > self._max_bytes:
                            self._trim()
                        return
                    self._put(run_id, _built_on(base, plan, new, view, added))
                    return
        # Nothing of the run remembered to build on (its first save here, the memory let
        # go of it, or another writer moved the head): the kept messages are frozen here,
        # once, and measured by their JSON.
        lengths = array("q")
        try:
            for message in messages[:keep]:
                lengths.append(sum(map(len, long_text.pieces(message, 0))))
        except TypeError:  # bytes: such a run is compared exactly
            self.forget(run_id)
            return
        lengths.extend(map(len, bodies))
        entry = Remembered(view, Snapshot([freeze(m) for m in messages[:keep]] + new, lengths), sum(lengths))
        with self._lock:
            self._put(run_id, entry)

    def _put(self, run_id: str, entry: Remembered) -> None:
        """``entry`` as ``run_id``'s (under the lock)."""
        old = self._runs.pop(run_id, None)
        if old is not None:
            self._messages -= old.view.count
            self._bytes -= old.size
        self._runs[run_id] = entry
        self._messages += entry.view.count
        self._bytes += entry.size
        self._trim()

    def _trim(self) -> None:
        """Within the bounds again, the least recently saved runs forgotten first (under the lock)."""
        while (
            self._messages > self._max_messages
            or self._bytes > self._max_bytes
            or len(self._runs) > self._max_runs
        ):
            _, dropped = self._runs.popitem(last=False)
            self._messages -= dropped.view.count
            self._bytes -= dropped.size

    def forget(self, run_id: str) -> None:
        with self._lock:
            old = self._runs.pop(run_id, None)
            if old is not None:
                self._messages -= old.view.count
                self._bytes -= old.size

    def _reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._runs = OrderedDict()
        self._messages = 0
        self._bytes = 0


def _built_on(
    base: Remembered, plan: MessagePlan, new: list[Any], view: StoredView, added: int
) -> Remembered:
    """The entry for ``view``, planned (``plan``) against ``base``'s head: its first
    ``plan.keep`` messages kept from there, ``new`` stored as ``plan.bodies`` (``added``
    bytes); under the lock."""
    keep, bodies = plan.keep, plan.bodies
    snapshot = base.snapshot
    if len(snapshot.items) == keep:  # the base's head directly, no longer the one remembered
        size = base.size
    else:  # an older head built on (a rewrite, a retry): its kept messages copied
        snapshot = snapshot.prefix(keep)
        size = snapshot.ends[keep - 1] if keep else 0
    snapshot.items.extend(new)
    snapshot.lengths.extend(map(len, bodies))
    return Remembered(view, snapshot, size + added)


def _match(snapshot: Snapshot, count: int, messages: list[Any], start: int) -> int:
    """How many leading ``messages`` are as the first ``count`` of ``snapshot`` (the first
    ``start`` known; the snapshot settled past ``count``)."""
    count = min(count, len(messages))
    if start >= count:
        return count
    kept = snapshot.items
    given = messages[start:count]
    # The whole list when it is this head's: no copy. It may grow meanwhile (a later
    # head of the run remembered by another thread): then it compares unequal, and
    # the loop below finds the match all the same (zip stops at ``given``'s end).
    if start or len(kept) != count:
        kept = kept[start:count]
    if _agree(given, kept):  # the usual fresh save: everything as remembered
        matched = count
    elif _agree(given[:-1], kept[:-1]):  # the last message replaced (a streamed answer)
        matched = count - 1
    else:
        matched = start  # something changed earlier: where, one message at a time
        for one, other in zip(given, kept, strict=False):
            if not _agree(one, other):
                break
            matched += 1
    # ``==`` says 1 == 1.0 == True: the typed messages it passed are compared as JSON.
    typed, items, long = snapshot.typed, snapshot.items, snapshot.long
    low = bisect_left(typed, start)
    high = bisect_left(typed, matched, low)
    if low == high:
        return matched
    indices = typed[low:high]
    if _same_json([messages[i] for i in indices], [items[i] for i in indices], long):
        return matched
    for index in indices:
        if not _same_json(messages[index], items[index], long):
            return index
    return matched  # pragma: no cover - the lists differ, so one of them does


# Every memory, so that a child forked while another thread held a lock
# starts with a fresh one (and an empty memory: the parent's is only a hint).
_HOLDERS: weakref.WeakSet[RunMemory] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for memory in list(_HOLDERS):
        memory._reset_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
