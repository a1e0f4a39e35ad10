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

Kept from a run's second load on (``second_sight``): a first load (a fresh
process resuming the run, the usual way) only notes the run, and lets each
row's bytes go as soon as it has read them, so its peak memory holds no copy
of the run for the memo. Bounded: ``MAX_BYTES`` of row bytes across runs, the
least recently loaded run forgotten first (a run larger than the bound is not
kept). One per store; thread-safe.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
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

    def keeps(self, key: Hashable) -> bool:
        """Whether ``learn`` of ``key`` now would keep what it is told (not a first sight)."""
        with self._lock:
            sighted = self._sighted
            return sighted is None or key in self._groups or key in sighted

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

    def __init__(self, max_bytes: int = MAX_BYTES, *, second_sight: bool = True) -> None:
        super().__init__(max_bytes, lambda entry: len(entry[1]), second_sight=second_sight)

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
        walk = RowChains(self, run_id)
        out: list[bytes] = []
        at = 0
        for first_seq, packed, count in pieces:
            out.extend(walk.after(first_seq, packed, bodies[at : at + count]))
            at += count
        walk.finish()
        return out


class RowChains:
    """One load's walk along a run's message rows, in order: the chain values after each
    row's bodies, from the memo (``VerifiedRows``) when it saw the very same bytes after
    the very same chain value, else hashed. A load asks row by row, so that it can let
    each row's bytes go before it reads the next (a first load's peak memory); without a
    memo every row is hashed."""

    __slots__ = ("_known", "_learnt", "_memo", "_run_id", "chain")

    def __init__(self, memo: VerifiedRows | None, run_id: str) -> None:
        self._memo, self._run_id = memo, run_id
        self._known = memo.group(run_id) if memo is not None else {}
        # None when the memo keeps nothing of this run yet (``second_sight``): a first
        # load holds no row for it, and its rows go as soon as they are read.
        self._learnt: dict[int, Verified] | None = {} if memo is not None and memo.keeps(run_id) else None
        self.chain = codec.EMPTY_CHAIN  # the chain value after the rows walked so far

    def after(self, first_seq: int, packed: bytes, bodies: list[Body]) -> Sequence[bytes]:
        """The chain values after each of ``bodies``: the bodies of the row that holds
        ``packed`` (its bytes as read) from ``first_seq``, the next row of the walk."""
        chain = self.chain
        entry = self._known.get(first_seq)
        # The same chain value before, then the row's own bytes compared whole (not its
        # digest column, not its length).
        if entry is not None and entry[0] == chain and entry[1] == packed and len(entry[2]) == len(bodies):
            hashed: Sequence[bytes] = entry[2]
        else:
            hashed = codec.extend_chain(chain, bodies)
            if self._learnt is not None:
                self._learnt[first_seq] = (chain, packed, tuple(hashed))
        if hashed:
            self.chain = hashed[-1]
        return hashed

    def finish(self) -> None:
        """The memo told what this walk hashed (or, on a first load, that the run was loaded)."""
        memo, learnt = self._memo, self._learnt
        if memo is not None and (learnt is None or learnt):
            memo.learn(self._run_id, learnt or {})


# Every memo, so that a child forked while another thread held a lock starts with a
# fresh one (and an empty memo: it only spares work).
_HOLDERS: weakref.WeakSet[RowMemo[Any, Any]] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for memo in list(_HOLDERS):
        memo._reset_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
