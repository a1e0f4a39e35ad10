"""A run that rewrites its last message every step (a progress line, a streamed answer).

Each rewrite starts a new range of the run's message log. The store keeps a
view's ranges few (size-tiered: store/delta.py, ``compact_from``) and finds
the rows that carry them by key (the ``carriers`` column), so the latest
checkpoint loads in proportion to its own messages — and every older
checkpoint still loads exactly what it saw.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from helpers.recording import StatementLog
from safepoint import Checkpoint, CorruptCheckpoint, Retention, codec

STEPS = 240


def message(index: int, version: int) -> dict[str, Any]:
    return {"role": "assistant", "content": f"message {index}, version {version}"}


def rewrite_run(store: safepoint.Store, run_id: str, steps: int) -> dict[int, list[dict[str, Any]]]:
    """Every step rewrites the last message; every other step also appends one.
    Returns the messages each step saved."""
    cp = Checkpoint(run_id=run_id, messages=[message(0, 0)])
    store.save(cp)
    saved = {0: [dict(m) for m in cp.messages]}
    for step in range(1, steps + 1):
        cp = cp.next()
        cp.messages[-1] = message(len(cp.messages) - 1, step)
        if step % 2 == 0:
            cp.messages.append(message(len(cp.messages), step))
        store.save(cp)
        saved[step] = [dict(m) for m in cp.messages]
    return saved


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.db'}"
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        yield f"{dsn}?schema={schema}"


def test_every_checkpoint_of_a_rewriting_run_loads_what_it_saved(url: str) -> None:
    rows = StatementLog()
    with safepoint.open_store(url, observer=rows) as store:
        saved = rewrite_run(store, "rw", STEPS)
        for step in [*range(0, STEPS, 7), STEPS]:
            assert codec.encode(list(store.load("rw", step).messages)) == codec.encode(saved[step]), step
        rows.ran.clear()
        latest = store.load("rw")
        assert codec.encode(list(latest.messages)) == codec.encode(saved[STEPS])
        view = latest.stored_view
        assert view is not None
        # Few ranges, however many rewrites: under 8 per tier.
        assert len(view.ranges) < 8 * 3, len(view.ranges)
        # The load read the rows that carry them, by key: not every row of the run.
        (carried,) = [count for name, count in rows.ran if name in {"view_carriers", "view_messages"}]
        assert [name for name, _ in rows.ran if name.startswith("view_")] == ["view_carriers"]
        assert carried <= 2 * len(view.ranges) < STEPS // 4


def test_fresh_checkpoints_that_rewrite_the_last_message_keep_few_ranges(url: str) -> None:
    """The seed's pattern: a new Checkpoint each step, its last message replaced."""
    with safepoint.open_store(url) as store:
        conversation = [message(0, 0)]
        for step in range(STEPS):
            conversation[-1] = message(len(conversation) - 1, step)
            if step % 2:
                conversation.append(message(len(conversation), step))
            store.save(Checkpoint(run_id="fresh-rw", step=step, messages=list(conversation)))
        latest = store.load("fresh-rw")
        assert codec.encode(list(latest.messages)) == codec.encode(conversation)
        assert latest.stored_view is not None
        assert len(latest.stored_view.ranges) < 8 * 3


def test_pruning_a_rewriting_run_keeps_its_kept_checkpoints_exact(tmp_path: Path) -> None:
    with safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        saved = rewrite_run(store, "rw", STEPS)
        store.prune_run("rw", Retention(keep_last=5))
        for step in range(STEPS - 4, STEPS + 1):
            assert codec.encode(list(store.load("rw", step).messages)) == codec.encode(saved[step])
        cp = store.load("rw").next()
        cp.messages[-1] = message(len(cp.messages) - 1, -1)
        store.save(cp)
        assert store.load("rw").messages[-1] == message(len(cp.messages) - 1, -1)


def test_rows_written_before_the_carriers_column_load_and_get_them_on_the_next_save(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with safepoint.open_store(f"sqlite:///{path}") as store:
        saved = rewrite_run(store, "rw", 40)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE safepoint_checkpoints SET carriers = NULL")  # as revision 4 left them
    rows = StatementLog()
    with safepoint.open_store(f"sqlite:///{path}", observer=rows) as store:
        head = store.load("rw")
        assert codec.encode(list(head.messages)) == codec.encode(saved[40])
        assert [name for name, _ in rows.ran if name.startswith("view_")] == ["view_messages"]
        cp = head.next()
        cp.messages.append(message(len(cp.messages), 41))
        store.save(cp)
        rows.ran.clear()
        assert len(store.load("rw").messages) == len(saved[40]) + 1
        assert [name for name, _ in rows.ran if name.startswith("view_")] == ["view_carriers"]


@pytest.mark.parametrize(
    ("carriers", "loads"),
    [("'not json'", True), ("'[[0, 1]]'", True), ("'[[0, 0], [1, 1]]'", False)],
    ids=["not JSON", "too few", "too narrow"],
)
def test_damaged_carriers_never_load_other_messages(tmp_path: Path, carriers: str, loads: bool) -> None:
    """Carriers that are not what a save writes are ignored (the rows are found by
    scanning); carriers that look right but miss rows make the load corrupt."""
    path = tmp_path / "state.db"
    with safepoint.open_store(f"sqlite:///{path}") as store:
        saved = rewrite_run(store, "rw", 20)
        ranges = store.load("rw").stored_view.ranges  # type: ignore[union-attr]
    with closing(sqlite3.connect(path)) as conn, conn:
        if carriers == "'[[0, 0], [1, 1]]'":  # one pair per range, all pointing at the first rows
            carriers = "'" + codec.encode([[0, 0]] * len(ranges)).decode() + "'"
        conn.execute(f"UPDATE safepoint_checkpoints SET carriers = {carriers} WHERE step = 20")
    with safepoint.open_store(f"sqlite:///{path}", read_only=True) as store:
        if loads:
            assert codec.encode(list(store.load("rw").messages)) == codec.encode(saved[20])
        else:
            with pytest.raises(CorruptCheckpoint):
                store.load("rw")


_steps = st.lists(
    st.one_of(
        st.tuples(st.just("rewrite"), st.integers(1, 3)),  # replace one of the last three
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("truncate"), st.integers(1, 2)),
    ),
    min_size=20,
    max_size=70,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_steps, fresh=st.lists(st.booleans(), min_size=70, max_size=70))
def test_compacted_ranges_load_every_checkpoint_exactly(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]], fresh: list[bool]
) -> None:
    """Rewrites near the end of the history, by a tracked list or a fresh checkpoint:
    every checkpoint, compacted or not, loads back what it saved."""
    path = tmp_path_factory.mktemp("compact") / "state.db"
    with safepoint.open_store(f"sqlite:///{path}") as store:
        cp = Checkpoint(run_id="c", messages=[message(0, 0)])
        store.save(cp)
        saved = {0: [dict(m) for m in cp.messages]}
        for step, ((kind, n), anew) in enumerate(zip(steps, fresh, strict=False), start=1):
            messages = list(cp.messages)
            if kind == "rewrite":
                at = max(0, len(messages) - n)
                messages[at] = message(at, step)
            elif kind == "append":
                messages += [message(len(messages) + i, step) for i in range(n)]
            else:
                messages = messages[: max(1, len(messages) - n)]
            if anew:
                cp = Checkpoint(run_id="c", step=step, messages=messages)
            else:
                cp = cp.next()
                cp.messages = messages
            store.save(cp)
            saved[step] = [dict(m) for m in messages]
        for step, expected in saved.items():
            assert codec.encode(list(store.load("c", step).messages)) == codec.encode(expected), step
