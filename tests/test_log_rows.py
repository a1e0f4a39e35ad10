"""The shortcuts of log_rows give exactly the general way's answers, on any rows (issue 17 part 5).

``select_bodies`` takes an appending run's rows (one span, rows following
each other seq by seq) by slices of each row at its newlines; ``marked`` asks one search of
all the bodies before it looks at each. Both are held here to the plain
definitions over random and tampered rows: wrong types, gaps, overlaps,
steps out of order, rows holding more or fewer bodies than their seqs say.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safepoint import codec
from safepoint.store import log_rows, stored
from safepoint.store.log_rows import marked, select_bodies
from safepoint.store.verified import RowChains

MARKISH = st.sampled_from([b'"$', b'{"$blob":1}', b"$"])
BODY = st.binary(max_size=6).map(lambda b: b.replace(b"\n", b"")) | MARKISH
PACKED = st.lists(BODY, min_size=1, max_size=3).map(b"\n".join)
# step (a text step is what tampering leaves), first_seq, added (mostly the row's own count), packed bodies
ROW = st.tuples(
    st.integers(0, 8) | st.just("7"), st.integers(0, 12) | st.none(), PACKED | st.just(12)
).flatmap(
    lambda row: st.tuples(
        st.just(row[0]),
        st.just(row[1]),
        st.sampled_from([_count(row[2]), _count(row[2]), 0, 2, "1"]),
        st.just(row[2]),
    )
)


def _count(packed: Any) -> int:
    return packed.count(b"\n") + 1 if isinstance(packed, bytes) else 1


def _general(carriers: list[tuple[Any, ...]], spans: tuple[tuple[int, int], ...]) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(log_rows, "_contiguous", lambda carriers, spans: None)
        return select_bodies(carriers, spans)[:2]


def _selected(carriers: list[tuple[Any, ...]], spans: tuple[tuple[int, int], ...]) -> Any:
    """select_bodies' bodies (as bytes, whatever their type) and carriers; its pieces, when
    it gives them, hold exactly its bodies."""
    bodies, carriers_found, pieces = select_bodies(carriers, spans)
    if pieces is not None:
        assert [b for _, packed, _ in pieces for b in packed.split(b"\n")] == [bytes(b) for b in bodies]
        assert sum(count for *_, count in pieces) == len(bodies)
    return [bytes(b) for b in bodies], carriers_found


@settings(max_examples=400, deadline=None)
@given(rows=st.lists(ROW, max_size=6), start=st.integers(0, 4), length=st.integers(0, 10))
def test_the_appending_shortcut_answers_as_the_general_way(rows: list[Any], start: int, length: int) -> None:
    """Random and tampered rows: select_bodies gives what it gives without its shortcut."""
    spans = ((start, start + length),)
    assert _selected(rows, spans) == _general(rows, spans)


@settings(max_examples=400, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(0, 6), st.lists(BODY, min_size=1, max_size=3)), min_size=1),
    start=st.integers(0, 3),
    cut=st.integers(-2, 2),
    shift=st.sampled_from([0, 0, 0, 1, -1]),
)
def test_rows_that_nearly_follow_each_other_answer_as_the_general_way(
    rows: list[tuple[int, list[bytes]]], start: int, cut: int, shift: int
) -> None:
    """Rows built seq after seq (steps in any order, one row's first seq shifted, the span cut short
    or long): the shortcut's bodies and carrier steps are the general way's."""
    carriers, seq = [], start
    for index, (step, bodies) in enumerate(rows):
        first = seq + (shift if index == len(rows) // 2 else 0)
        carriers.append((step, first, len(bodies), b"\n".join(bodies)))
        seq += len(bodies)
    spans = ((start, max(start, seq + cut)),)
    assert _selected(carriers, spans) == _general(carriers, spans)


def test_an_appending_runs_rows_take_the_shortcut() -> None:
    """One row per save, seq after seq: the shortcut answers (and agrees)."""
    rows = [(step, step, 1, f"body {step}".encode()) for step in range(5)]
    rows[2] = (2, 2, 2, b"two\ntwo more")
    rows[3:] = [(3, 4, 1, b"three"), (4, 5, 1, b"four")]
    spans = ((0, 6),)
    assert log_rows._contiguous(rows, spans) is not None
    assert _selected(rows, spans) == _general(rows, spans)
    assert select_bodies(rows, spans)[1] == ((0, 4),)
    # The bodies are slices of the rows, not copies.
    assert all(type(body) is memoryview for body in select_bodies(rows, spans)[0])


def test_a_row_whose_added_column_is_not_its_count_goes_the_general_way() -> None:
    """A row saying it adds more (or fewer) bodies than its newlines hold is not sliced by its column."""
    for added in (1, 3):
        rows = [(0, 0, 1, b"zero"), (1, 1, added, b"one\none more")]
        assert log_rows._contiguous(rows, ((0, 3),)) is None
        assert _selected(rows, ((0, 3),)) == _general(rows, ((0, 3),))


@settings(max_examples=400, deadline=None)
@given(
    bodies=st.lists(BODY, max_size=8),
    marks=st.lists(st.sampled_from([b'"$', b'"$blob"', b"[SECRET:", b"$", b"x"]), min_size=1, max_size=3),
)
def test_marked_finds_what_a_search_of_each_body_finds(bodies: list[bytes], marks: list[bytes]) -> None:
    """marked's probe byte, and its search of a view's row first, miss nothing and add nothing."""
    expected = [i for i, body in enumerate(bodies) if any(mark in body for mark in marks)]
    assert marked(bodies, tuple(marks)) == expected
    # The same bodies as slices of rows of two (what an appending run's load gives).
    views: list[Any] = []
    rows: list[bytes] = []
    for at in range(0, len(bodies), 2):
        row = b"\n".join(bodies[at : at + 2])
        rows.append(row)
        view, offset = memoryview(row), 0
        for body in bodies[at : at + 2]:
            views.append(view[offset : offset + len(body)])
            offset += len(body) + 1
    assert marked(views, tuple(marks)) == expected
    assert marked(log_rows.Bodies(views, rows), tuple(marks)) == expected


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.lists(BODY, min_size=1, max_size=3), min_size=1, max_size=5),
    marks=st.lists(st.sampled_from([b'"$', b'"$blob"', b"[SECRET:", b"$", b"x"]), max_size=3, unique=True),
)
def test_reading_rows_one_by_one_finds_what_marked_finds(rows: list[list[bytes]], marks: list[bytes]) -> None:
    """A load reading the usual log row by row (``stored._read_rows``, each row let go as it is
    read) gives the chain hashing gives, finds each mark in the bodies ``marked`` finds, and
    holds none of the rows' bytes after."""
    carriers, seq = [], 0
    for step, bodies in enumerate(rows):
        carriers.append((step, seq, len(bodies), b"\n".join(bodies)))
        seq += len(bodies)
    bodies, _, pieces = select_bodies(carriers, ((0, seq),))
    assert pieces is not None
    flat = [bytes(body) for body in bodies]
    expected = {mark: marked(flat, (mark,)) for mark in marks}
    chains, _, found, _ = stored._read_rows(bodies, pieces, RowChains(None, "r"), tuple(marks))
    assert chains == codec.extend_chain(codec.EMPTY_CHAIN, flat)
    assert found == expected
    assert set(bodies) == {None}
    assert set(pieces) == {None}
    assert set(getattr(bodies, "rows", [None])) == {None}
