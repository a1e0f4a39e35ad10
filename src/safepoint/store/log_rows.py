"""Gathering a checkpoint's messages (or their chain values) from the rows of a run's
message log that carry them: ``select_bodies`` for a load, ``select_chains`` for a
save that compares with the head without reading bodies. Pure: no I/O."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import Any

CHAIN_SIZE = 32  # bytes of one digest chain value (SHA-256)


class _Log:
    """Rows of a run's message log, in seq order, their items (bodies or chain
    values, one per message) laid end to end, and where each row's seqs lie."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.offsets: list[int] = []  # where each row's items begin in ``items``
        self.steps: list[int] = []
        self.items: list[bytes] = []

    def add(self, step: int, first_seq: int, items: list[bytes]) -> None:
        self.starts.append(first_seq)
        self.ends.append(first_seq + len(items))
        self.offsets.append(len(self.items))
        self.steps.append(step)
        self.items.extend(items)

    def in_order(self) -> _Log:
        """Itself when its rows came in seq order (a save's seqs grow with its step), else sorted."""
        if all(a <= b for a, b in zip(self.starts, self.starts[1:], strict=False)):
            return self
        ordered = _Log()
        for row in sorted(range(len(self.starts)), key=self.starts.__getitem__):
            begin = self.offsets[row]
            ordered.add(
                self.steps[row],
                self.starts[row],
                self.items[begin : begin + self.ends[row] - self.starts[row]],
            )
        return ordered

    def pieces(self, start: int, end: int) -> Iterator[tuple[int, int, int]]:
        """``(row, first item, end item)`` for the items of seqs ``start`` to ``end``
        the rows hold, in order; seqs no row holds are skipped. Bounded by the rows,
        not by the span (a tampered ``[0, 10**12]`` costs what the rows cost)."""
        row = max(bisect.bisect_right(self.starts, start) - 1, 0)
        seq = start
        while seq < end and row < len(self.starts):
            if seq < self.starts[row]:
                seq = self.starts[row]
                continue
            stop = min(end, self.ends[row])
            if seq < stop:
                at = self.offsets[row] + seq - self.starts[row]
                yield row, at, at + stop - seq
                seq = stop
            row += 1


def select_bodies(
    carriers: list[tuple[Any, ...]], spans: tuple[tuple[int, int], ...]
) -> tuple[list[Body], tuple[tuple[int, int], ...], list[Piece] | None]:
    """The message bodies a checkpoint sees, from the rows that added them, each
    span's carriers as the rows show them (first and last step; (0, -1): none),
    and, for the usual log (``_contiguous``), the rows the bodies came from, whole.

    ``carriers`` are ``(step, first_seq, added, packed)`` rows of the run, in log
    order; a body missing from them is simply absent from the result (the digest
    check then reports the checkpoint corrupt). Only seqs the carriers hold
    are looked at, so a tampered span (``[0, 10**12]``) costs no more than
    the rows read; a carrier whose columns are not what a save writes
    contributes nothing. A body is bytes, or a memoryview slice of its row's
    bytes (the usual log: no copy of the messages).
    """
    contiguous = _contiguous(carriers, spans)
    if contiguous is not None:
        return contiguous
    log = _Log()
    for step, first_seq, _added, packed in carriers:
        if (
            type(first_seq) is int
            and type(step) is int
            and isinstance(packed, bytes | bytearray | memoryview)
        ):
            log.add(step, first_seq, bytes(packed).split(b"\n"))
    log = log.in_order()
    out: list[Body] = []
    found: list[tuple[int, int]] = []
    for start, end in spans:
        first = last = -1
        for row, low, high in log.pieces(start, end):
            out.extend(log.items[low:high])
            step = log.steps[row]
            first = step if first < 0 else min(first, step)
            last = max(last, step)
        found.append((first, last) if first >= 0 else (0, -1))
    return out, tuple(found), None


# A body as a load gives it: bytes, or a slice of its row's bytes.
Body = bytes | memoryview


class Bodies(list[Body]):
    """The bodies of the usual log (``_contiguous``), slices of ``rows``: the rows they came
    from, whole, so that ``marked`` can search a row once rather than body by body."""

    __slots__ = ("rows",)

    def __init__(self, bodies: list[Body], rows: list[bytes]) -> None:
        super().__init__(bodies)
        self.rows = rows


# One row of the usual log, whole: its first seq, its packed bytes, and how many
# bodies it gave (the verification memo, ``verified.py``, is keyed by these).
Piece = tuple[int, bytes, int]


def _contiguous(
    carriers: list[tuple[Any, ...]], spans: tuple[tuple[int, int], ...]
) -> tuple[list[Body], tuple[tuple[int, int], ...], list[Piece]] | None:
    """``select_bodies`` for the usual log, or None: one span, and rows of bytes that follow each
    other seq by seq from its start to its end, each added by a later step than the one before.

    That is an appending run's latest checkpoint, one row per save. Each row's
    ``added`` column says how many bodies it holds; they are found by ``find``
    (memchr) and given as memoryview slices of the row: no per-byte count or
    split in Python's own loops and no copy of any body (a 1,000-row load of
    6 MB: 8 -> 1 ms). A row whose newlines are not ``added - 1``, and anything
    else not so (tampered rows included), goes the general way.
    """
    if len(spans) != 1 or not carriers:
        return None
    ((start, end),) = spans
    seq, before = start, -1
    bodies: list[Body] = []
    pieces: list[Piece] = []
    add = bodies.append
    for step, first, added, packed in carriers:
        # Spelled out, not a helper over the three: this runs once a row of every load.
        if type(packed) is not bytes or type(step) is not int or type(first) is not int:
            return None
        if type(added) is not int:
            return None
        if first != seq or step <= before or added < 1:
            return None
        view, at = memoryview(packed), 0
        for _ in range(added - 1):
            newline = packed.find(b"\n", at)
            if newline < 0:
                return None
            add(view[at:newline])
            at = newline + 1
        if packed.find(b"\n", at) >= 0:
            return None
        add(view[at:])
        pieces.append((first, packed, added))
        seq, before = seq + added, step
    if seq != end:
        return None
    return Bodies(bodies, [packed for _, packed, _ in pieces]), ((carriers[0][0], carriers[-1][0]),), pieces


def select_chains(rows: list[tuple[Any, Any]], spans: tuple[tuple[int, int], ...]) -> list[bytes] | None:
    """The chain value after each message the spans cover, from ``(first_seq, chains)``
    rows; None when a row has none or a seq is missing."""
    log = _Log()
    for first_seq, chains in rows:
        if type(first_seq) is not int or not isinstance(chains, bytes | bytearray | memoryview):
            return None
        packed = bytes(chains)
        if len(packed) % CHAIN_SIZE:
            return None
        log.add(0, first_seq, [packed[at : at + CHAIN_SIZE] for at in range(0, len(packed), CHAIN_SIZE)])
    log = log.in_order()
    out: list[bytes] = []
    for start, end in spans:
        before = len(out)
        for _row, low, high in log.pieces(start, end):
            out.extend(log.items[low:high])
        if len(out) - before != end - start:
            return None  # a seq no row holds
    return out


def marked(bodies: Sequence[Body], marks: tuple[bytes, ...]) -> list[int]:
    """The indexes of the bodies that show any of ``marks``.

    Each body is first asked for a byte of the mark that JSON text seldom
    holds (``probe_of``): one byte is found at memchr's speed, where a mark
    that starts with a quote stops the search at every quote (a 1,001-message
    load: 0.5 -> 0.06 ms per mark); only the bodies that hold it are searched
    for the mark. A memoryview body (a slice of its row, ``_contiguous``) is
    searched through its row first, once a row: the usual row holds no mark,
    and a view cannot be searched for bytes itself. No joined copy of the
    bodies: a load's peak memory counts.
    """
    probes = [(probe_of(mark), mark) for mark in marks]
    whole = getattr(bodies, "rows", None)
    if whole is not None and not any(row.find(probe) >= 0 for row in whole for probe, _ in probes):
        return []  # the usual load: no row shows a probe byte (one search of each row)
    rows: dict[int, bool] = {}  # id of a row's bytes -> whether it shows a mark
    found: list[int] = []
    for i, body in enumerate(bodies):
        if type(body) is memoryview:
            row = body.obj
            shows = rows.get(id(row))
            if shows is None:
                shows = rows[id(row)] = _shows(row, probes)
            if not shows:
                continue
        if _shows(bytes(body), probes):
            found.append(i)
    return found


def _shows(data: Any, probes: list[tuple[bytes, bytes]]) -> bool:
    """Whether ``data`` (bytes) shows a mark, by ``find``, not ``in``: ``b"$" in row`` first
    tries its operand as an int (``3 in row``), and the TypeError it makes and clears costs
    more than the memchr (~5,000 instructions a search, 4% of a 1,000-row load)."""
    return any(data.find(probe) >= 0 and data.find(mark) >= 0 for probe, mark in probes)


# Bytes that JSON text is full of: a mark is looked for by one of its other bytes first.
_COMMON = frozenset(b'"{}[],:. -_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ')


def probe_of(mark: bytes) -> bytes:
    """A byte of ``mark`` JSON text seldom holds (``$`` in the store's marks), else the mark itself."""
    return next((bytes([b]) for b in mark if b not in _COMMON), mark)
