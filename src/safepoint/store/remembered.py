"""What a store remembers of the runs it saved, so a fresh checkpoint saves in O(new).

A harness that builds a new ``Checkpoint`` every step — ``messages=list(conversation)``,
or ``asdict()`` of its own dataclass, which deep-copies — hands the store a
list it never loaded or saved. The delta (``delta.py``) would then have to
scrub and encode every message and compare it with the stored ones, and read
the head's bodies to do so: a save at step 1000 would cost as much as the
whole history. ``RunMemory`` spares that.

For each run this store saved, it keeps the head's ``StoredView`` and, for
each of its messages *as the caller gave it* (before scrubbing), a keyed
fingerprint: BLAKE3 in keyed mode (``blake3``, a hash made for this, several
times faster than HMAC-SHA-256 here) of its JSON as given (key order kept),
cut to 16 bytes, under a random key of this store object. The text is
attacker-chosen; without the key nobody can make a message that
fingerprints like another. It also keeps a running hash over the JSON of the
whole list so far (``[`` m0 ``,`` m1 …, without the closing bracket), so
that the usual save — the stored messages as they were, new ones appended —
checks its whole prefix with one encode and one hash, both in native code,
and then extends it with only the new messages.

Equal fingerprints mean equal JSON, and the stored message then stands for
the given one; that is also true of values JSON cannot tell apart (a tuple
and a list, ``NaN`` and ``None``). Like a tracked list's clean prefix, a
message recognised here is not scrubbed again (a secret registered after it
was stored is not looked for in it).

A hint, never trusted alone: the save plans against the remembered view and
``ops.save`` checks that view against the run's head inside its transaction,
redoing the plan exactly when another writer moved the head. Bounded:
``MAX_MESSAGES`` messages over ``MAX_RUNS`` runs, the least recently saved
forgotten first; a longer run is compared exactly. A forked child starts
with an empty memory and its own lock.
"""

from __future__ import annotations

import hmac
import os
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson
from blake3 import blake3

from safepoint import long_text
from safepoint.messagelist import MessageList, StoredView

# About 100 bytes a message (its fingerprint, and the view's chain value the
# memory keeps alive): 262,144 messages hold some 26 MB.
MAX_MESSAGES = 262_144
MAX_RUNS = 4_096
_SIZE = 16  # bytes of a message's fingerprint
_OPEN = b"["
_COMMA = b","


def _given(value: Any) -> list[bytes]:
    """JSON of a value as given, in pieces (``long_text.pieces``: a very long
    string is a piece of its own, hashed without a joined copy): dict keys in
    their order (sorting them would cost more than the hash), raising
    ``TypeError`` where JSON has nothing for it."""
    return long_text.pieces(value, 0)


def _feed(hasher: Any, given: list[bytes]) -> None:
    for piece in given:
        hasher.update(piece)


@dataclass(slots=True)
class Remembered:
    """One run's head as this store saved it."""

    view: StoredView
    fingerprints: bytes  # _SIZE bytes for each of the view's messages, as given
    running: Any  # blake3 over "[" m0 "," … m(count-1); None when not known
    # The same over all but the last message: a run that replaces its last
    # message every step (a streamed answer) is recognised by two hashes too.
    previous: Any = None
    # Whether a message held a string long enough for long_text to splice:
    # only then does the prefix check pay long_text's walk over the history.
    long: bool = False


@dataclass(frozen=True, slots=True)
class Recall:
    """What one save starts from: ``view``, the head the delta is planned
    against (the checkpoint's own, else the remembered one), whose first
    ``known`` messages are known to be as given; ``base``, the memory it came
    from, and ``running``, the hash over the first ``running_count`` messages."""

    view: StoredView | None
    known: int
    base: Remembered | None = None
    running: Any = None
    running_count: int = 0


class RunMemory:
    """The runs this store saved, by run id (thread-safe, bounded)."""

    def __init__(self, max_messages: int = MAX_MESSAGES, max_runs: int = MAX_RUNS) -> None:
        self._key = os.urandom(32)
        self._max_messages = max_messages
        self._max_runs = max_runs
        self._runs: OrderedDict[str, Remembered] = OrderedDict()
        self._messages = 0
        self._lock = threading.Lock()
        _HOLDERS.add(self)

    def _fingerprint(self, given: list[bytes]) -> bytes:
        hasher = blake3(key=self._key)
        _feed(hasher, given)
        return hasher.digest(_SIZE)

    def recall(self, run_id: str, step: int, view: StoredView | None, messages: list[Any]) -> Recall:
        """Where a save of ``messages`` as ``run_id``'s ``step`` starts; ``view``
        is the checkpoint's own stored view (None for a fresh checkpoint)."""
        tracked = view is not None and isinstance(messages, MessageList) and messages.stored is view
        known = min(messages.clean_prefix, len(messages)) if tracked else 0  # type: ignore[attr-defined]
        with self._lock:
            base = self._runs.get(run_id)
            if base is not None:
                self._runs.move_to_end(run_id)
        if base is None or (view is not None and base.view.digest != view.digest):
            return Recall(view, known)
        if view is None:
            if base.view.step != step - 1:
                return Recall(None, 0)  # not the step after it: nothing to plan against
            view = base.view
        if known == view.count and base.running is not None:
            # A tracked list, only appended to since: nothing to check.
            return Recall(view, known, base, base.running.copy(), known)
        matched, running = self._match(base, messages, known)
        return Recall(view, max(known, matched), base, running, matched if running is not None else 0)

    def _prefix(self, messages: list[Any], count: int, expected: Any, long: bool) -> Any:
        """The running hash over the first ``count`` messages if it is ``expected``'s, else None.

        One orjson call over the whole prefix, unless the remembered run held
        a long string (``long``): then ``long_text``, whose walk over every
        message in Python would cost more than the encoding itself.
        """
        try:
            prefix = _given(messages[:count]) if long else [orjson.dumps(messages[:count])]
        except TypeError:  # bytes, or the store's own reference objects: compared exactly
            return None
        running = blake3(key=self._key)  # the JSON array but its closing bracket
        _feed(running, prefix[:-1])
        running.update(memoryview(prefix[-1])[:-1])
        return running if hmac.compare_digest(running.digest(), expected.digest()) else None

    def _match(self, base: Remembered, messages: list[Any], known: int) -> tuple[int, Any]:
        """How many leading ``messages`` fingerprint as the remembered ones, and
        the running hash over them (None when not known)."""
        count = min(base.view.count, len(messages))
        if count == base.view.count and base.running is not None:
            running = self._prefix(messages, count, base.running, base.long)
            if running is not None:
                return count, running
            if base.previous is not None:  # the last message replaced?
                running = self._prefix(messages, count - 1, base.previous, base.long)
                if running is not None:
                    return count - 1, running
        # Something changed (or the running hash is not known): one message at a time.
        running = blake3(_OPEN, key=self._key)
        stored = base.fingerprints
        for index in range(count):
            try:
                given = _given(messages[index])
            except TypeError:
                return index, running
            at = index * _SIZE
            if self._fingerprint(given) != stored[at : at + _SIZE]:
                return index, running
            if index:
                running.update(_COMMA)
            _feed(running, given)
        return count, running

    def remember(
        self, run_id: str, recall: Recall, keep: int, base_digest: bytes | None, messages: Any
    ) -> None:
        """After a commit: ``messages`` (a ``MessageList``) are the run's head,
        planned against the view whose digest is ``base_digest``, its first
        ``keep`` messages kept from there."""
        view = messages.stored
        same_base = recall.base is not None and base_digest == recall.base.view.digest
        start = keep if same_base else 0
        if view.count > self._max_messages:
            self.forget(run_id)
            return
        try:
            given = [_given(m) for m in messages[start:]]
        except TypeError:  # bytes: such a run is compared exactly
            self.forget(run_id)
            return
        kept = recall.base.fingerprints[: start * _SIZE] if start and recall.base is not None else b""
        fingerprints = kept + b"".join(map(self._fingerprint, given))
        running = recall.running if same_base and recall.running_count == keep else None
        previous = None
        if running is not None:
            for index, body in enumerate(given, start):
                if index == view.count - 1:
                    previous = running.copy()
                if index:
                    running.update(_COMMA)
                _feed(running, body)
        elif start == 0:
            # Hashed piece by piece, as above: joining the bodies would copy
            # them all (twice, with the opening bracket) to hash them once.
            running = blake3(_OPEN, key=self._key)
            for index, body in enumerate(given):
                if index == len(given) - 1:
                    previous = running.copy()
                if index:
                    running.update(_COMMA)
                _feed(running, body)
        kept_long = start > 0 and recall.base is not None and recall.base.long
        long = kept_long or any(len(body) > 1 for body in given)  # a long string's body is in pieces
        entry = Remembered(view, fingerprints, running, previous, long)
        with self._lock:
            old = self._runs.pop(run_id, None)
            if old is not None:
                self._messages -= old.view.count
            self._runs[run_id] = entry
            self._messages += view.count
            while self._messages > self._max_messages or len(self._runs) > self._max_runs:
                _, dropped = self._runs.popitem(last=False)
                self._messages -= dropped.view.count

    def forget(self, run_id: str) -> None:
        with self._lock:
            old = self._runs.pop(run_id, None)
            if old is not None:
                self._messages -= old.view.count

    def _reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._runs = OrderedDict()
        self._messages = 0


# Every memory, so that a child forked while another thread held a lock
# starts with a fresh one (and an empty memory: the parent's is only a hint).
_HOLDERS: weakref.WeakSet[RunMemory] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for memory in list(_HOLDERS):
        memory._reset_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
