"""The shortcuts of log_rows give exactly the general way's answers, on any rows (issue 17 part 5).

``select_bodies`` takes an appending run's rows (one span, rows following
each other seq by seq) by one join and split; ``marked`` asks one search of
all the bodies before it looks at each. Both are held here to the plain
definitions over random and tampered rows: wrong types, gaps, overlaps,
steps out of order, rows holding more or fewer bodies than their seqs say.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safepoint.store import log_rows
from safepoint.store.log_rows import marked, select_bodies

MARKISH = st.sampled_from([b'"$', b'{"$blob":1}', b"$"])
BODY = st.binary(max_size=6).map(lambda b: b.replace(b"\n", b"")) | MARKISH
ROW = st.tuples(
    st.integers(0, 8) | st.just("7"),  # step (a text step is what tampering leaves)
    st.integers(0, 12) | st.none(),  # first_seq
    st.lists(BODY, min_size=1, max_size=3).map(b"\n".join) | st.just(12),  # packed bodies
)


def _general(carriers: list[tuple[Any, ...]], spans: tuple[tuple[int, int], ...]) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(log_rows, "_contiguous", lambda carriers, spans: None)
        return select_bodies(carriers, spans)


@settings(max_examples=400, deadline=None)
@given(rows=st.lists(ROW, max_size=6), start=st.integers(0, 4), length=st.integers(0, 10))
def test_the_appending_shortcut_answers_as_the_general_way(rows: list[Any], start: int, length: int) -> None:
    """Random and tampered rows: select_bodies gives what it gives without its shortcut."""
    spans = ((start, start + length),)
    assert select_bodies(rows, spans) == _general(rows, spans)


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
        carriers.append((step, seq + (shift if index == len(rows) // 2 else 0), b"\n".join(bodies)))
        seq += len(bodies)
    spans = ((start, max(start, seq + cut)),)
    assert select_bodies(carriers, spans) == _general(carriers, spans)


def test_an_appending_runs_rows_take_the_shortcut() -> None:
    """One row per save, seq after seq: the shortcut answers (and agrees)."""
    rows = [(step, step, f"body {step}".encode()) for step in range(5)]
    rows[2] = (2, 2, b"two\ntwo more")
    rows[3:] = [(3, 4, b"three"), (4, 5, b"four")]
    spans = ((0, 6),)
    assert log_rows._contiguous(rows, spans) is not None
    assert select_bodies(rows, spans) == _general(rows, spans)
    assert select_bodies(rows, spans)[1] == ((0, 4),)


@settings(max_examples=400, deadline=None)
@given(
    bodies=st.lists(BODY, max_size=8),
    marks=st.lists(st.sampled_from([b'"$', b'"$blob"', b"[SECRET:", b"$", b"x"]), min_size=1, max_size=3),
)
def test_marked_finds_what_a_search_of_each_body_finds(bodies: list[bytes], marks: list[bytes]) -> None:
    """marked's one search of the joined bodies, and its probe byte, miss nothing and add nothing."""
    expected = [i for i, body in enumerate(bodies) if any(mark in body for mark in marks)]
    assert marked(bodies, tuple(marks)) == expected
