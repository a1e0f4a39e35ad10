"""What a store remembers of the message rows it has verified, so a load hashes only what is new.

Every load checks its messages against the digest chain its header pins:
chain value ``c[i] = sha256(c[i-1] + body[i])``. Loading a long run again and
again would hash the same megabytes each time (a 1,000-step run of 6 MB: 4.5
ms of a 20 ms load). ``VerifiedRows`` is a memo of that function: for each
row of a run's message log it keeps the row's packed bytes *as read*, the
chain value before them and the chain values after each of its bodies. A
later load whose row holds the very same bytes (one C-level comparison) after
the very same chain value takes the chain values from the memo; any other row
is hashed, and the memo learns it.

It is keyed by the bytes, never by a digest column, so it can only ever give
the chain values those bytes have: a row replaced after the memo saw it (same
digest column, other bytes) misses and is hashed; a replayed older row gets
its own (older) chain values. Either way the load compares the last chain
value with its header's, as it does without the memo, and reports the
checkpoint corrupt. The memo changes how often a byte is hashed, not what a
load accepts.

Bounded: ``MAX_BYTES`` of row bytes across runs, the least recently loaded
run forgotten first (a run larger than the bound is not kept). One per store;
thread-safe.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from safepoint import codec

from .log_rows import Body, Piece

K = TypeVar("K")
V = TypeVar("V")

# Row bytes kept across runs: a 1,000-step run of the usual agent (6 KB a step) is 6 MB.
MAX_BYTES = 64 * 1024 * 1024
# Keys a ``second_sight`` memo notes as seen once (a few bytes each).
SIGHTED = 4096


class RowMemo(Generic[K, V]):
    """Entries by a group key (a run) and a row key, bounded by the bytes they keep: the
    least recently used group goes first; a group larger than the bound is not kept.
    Readers get a group's dict as it is: a change makes a new one. Thread-safe.

    With ``second_sight``, a group is kept from the second ``learn`` of its key on:
    the first only notes the key (``SIGHTED`` keys at most). A process that loads
    a run once (a fresh process resuming it: the usual way) then holds no more
    than that load needs, and its peak memory has no copy for the memo."""

    def __init__(self, max_bytes: int, size: Callable[[V], int], *, second_sight: bool = False) -> None:
        self.max_bytes = max_bytes
        self._entry_size = size
        self._groups: OrderedDict[Hashable, dict[K, V]] = OrderedDict()
        self._size: dict[Hashable, int] = {}
        self._total = 0
        self._sighted: OrderedDict[Hashable, None] | None = OrderedDict() if second_sight else None
        self._lock = threading.Lock()
        _HOLDERS.add(self)

    def group(self, key: Hashable) -> dict[K, V]:
        """The entries of ``key`` (empty when none); read only."""
        with self._lock:
            found = self._groups.get(key)
            if found is None:
                return {}
            self._groups.move_to_end(key)
            return found

    def learn(self, key: Hashable, learnt: dict[K, V]) -> None:
        """``learnt`` added to the entries of ``key`` (replacing those of the same row keys)."""
        with self._lock:
            sighted = self._sighted
            if sighted is not None and key not in self._groups and key not in sighted:
                sighted[key] = None  # seen once: kept when it is learnt again
                if len(sighted) > SIGHTED:
                    sighted.popitem(last=False)
                return
            # A new dict, not the old one changed: another thread's load may be reading it.
            rows = {**self._groups.pop(key, {}), **learnt}
            self._total -= self._size.pop(key, 0)
            size = sum(map(self._entry_size, rows.values()))
            if size <= self.max_bytes:
                self._groups[key], self._size[key] = rows, size
                self._total += size
            while self._total > self.max_bytes:
                oldest, _rows = self._groups.popitem(last=False)
                self._total -= self._size.pop(oldest)

    def _reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._groups, self._size, self._total = OrderedDict(), {}, 0
        if self._sighted is not None:
            self._sighted = OrderedDict()


# A verified row: the chain value before it, its bytes as read, its bodies' chain values.
Verified = tuple[bytes, bytes, tuple[bytes, ...]]


class VerifiedRows(RowMemo[int, Verified]):
    """The chain values of message rows already hashed, by run and first seq (see the module)."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        super().__init__(max_bytes, lambda entry: len(entry[1]))

    def same_rows(self, run_id: str, carriers: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """``carriers`` (``(step, first_seq, added, packed)`` rows of the run) with each row's
        bytes replaced by the memo's own object when they are equal: the bytes just read
        can then go at once (a warm load's peak memory), and ``chains`` finds the row by
        identity. Equal bytes for equal bytes: nothing a load checks changes."""
        known = self.group(run_id)
        if not known:
            return carriers
        out = []
        for row in carriers:
            entry = known.get(row[1])
            if entry is not None and entry[1] == row[3]:
                row = (row[0], row[1], row[2], entry[1])  # noqa: PLW2901
            out.append(row)
        return out

    def chains(self, run_id: str, pieces: list[Piece], bodies: list[Body]) -> list[bytes]:
        """The chain value after each of ``bodies``, from the empty chain: the bodies of
        ``pieces`` (rows of the run, in order, each given as its first seq, its
        bytes as read and how many of ``bodies`` it holds)."""
        known = self.group(run_id)
        out: list[bytes] = []
        learnt: dict[int, Verified] = {}
        pending: list[Piece] = []  # rows to hash, one after another from ``out``'s end
        at = 0  # where the pending rows' bodies begin

        def flush() -> None:  # the pending rows hashed in one pass, each remembered
            nonlocal at
            if not pending:
                return
            end = at + sum(count for *_, count in pending)
            chain = out[-1] if out else codec.EMPTY_CHAIN
            hashed = codec.extend_chain(chain, bodies[at:end])
            offset = 0
            for first_seq, packed, count in pending:
                learnt[first_seq] = (chain, packed, tuple(hashed[offset : offset + count]))
                chain, offset = hashed[offset + count - 1], offset + count
            out.extend(hashed)
            pending.clear()
            at = end

        for piece in pieces:
            first_seq, packed, count = piece
            entry = known.get(first_seq)
            # The row's own bytes, compared whole (not its digest column, not its length) ...
            if entry is not None and entry[1] == packed and len(entry[2]) == count:
                flush()
                # ... after the same chain value.
                if entry[0] == (out[-1] if out else codec.EMPTY_CHAIN):
                    out.extend(entry[2])
                    at += count
                    continue
            pending.append(piece)
        flush()
        if learnt:
            self.learn(run_id, learnt)
        return out


# Every memo, so that a child forked while another thread held a lock starts with a
# fresh one (and an empty memo: it only spares work).
_HOLDERS: weakref.WeakSet[RowMemo[Any, Any]] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for memo in list(_HOLDERS):
        memo._reset_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
