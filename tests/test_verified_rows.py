"""A store's memo of the message rows it has verified (``store/verified.py``), issue 34.

A load hashes only rows whose bytes, as read, it has not verified before; it
must still catch every row replaced after the memo saw it: other bytes under
the same digest column, a replayed older row, rows swapped. The conformance
suite alters a row after loads on every backend
(``test_rows_altered_after_a_load_raise_corrupt_checkpoint``); here, the memo
itself, and the replays by raw SQL on SQLite (plain and encrypted: there the
sealed rows opened before are not decrypted again) and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import safepoint
from conftest_postgres import fresh_schema, raw, require_postgres
from safepoint import Checkpoint, CorruptCheckpoint, Store, codec
from safepoint.store import verified
from safepoint.store.verified import VerifiedRows
from test_encryption import flipped, keyring

RUN = "memo"


def _row(*bodies: bytes) -> tuple[bytes, list[bytes]]:
    return b"\n".join(bodies), list(bodies)


def _pieces(rows: list[tuple[bytes, list[bytes]]]) -> tuple[list[Any], list[bytes]]:
    pieces, bodies, seq = [], [], 0
    for packed, row_bodies in rows:
        pieces.append((seq, packed, len(row_bodies)))
        bodies.extend(row_bodies)
        seq += len(row_bodies)
    return pieces, bodies


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many bodies the memo (and a load) hash, call by call."""
    counts: list[int] = []
    real = codec.extend_chain

    def counting(chain: bytes, bodies: Any) -> list[bytes]:
        out = real(chain, bodies)
        counts.append(len(out))
        return out

    monkeypatch.setattr(codec, "extend_chain", counting)
    return counts


def test_the_memo_gives_the_chain_hashing_gives_and_hashes_only_new_rows(hashed: list[int]) -> None:
    rows = [_row(b'{"a":1}', b'{"b":2}'), _row(b'{"c":3}')]
    memo = VerifiedRows(second_sight=False)
    pieces, bodies = _pieces(rows)
    expected = codec.extend_chain(codec.EMPTY_CHAIN, bodies)
    hashed.clear()
    assert memo.chains(RUN, pieces, bodies) == expected
    assert sum(hashed) == 3
    hashed.clear()
    # The same bytes read again (other objects, equal bytes): nothing hashed.
    again = [(bytes(bytearray(packed)), [bytes(b) for b in row]) for packed, row in rows]
    assert memo.chains(RUN, *_pieces(again)) == expected
    assert hashed == []
    # A row appended: only it is hashed.
    rows.append(_row(b'{"d":4}', b'{"e":5}'))
    pieces, bodies = _pieces(rows)
    expected = codec.extend_chain(codec.EMPTY_CHAIN, bodies)
    hashed.clear()
    assert memo.chains(RUN, pieces, bodies) == expected
    assert sum(hashed) == 2


@pytest.mark.parametrize("change", ["same length", "replayed row", "swapped rows", "other run's chain"])
def test_a_row_the_memo_saw_replaced_is_hashed_again(hashed: list[int], change: str) -> None:
    """Keyed by the bytes as read: any other bytes (or other bytes before them) give their own chain."""
    rows = [_row(b'{"role":"user"}'), _row(b'{"role":"assistant"}'), _row(b'{"role":"tool"}')]
    memo = VerifiedRows(second_sight=False)
    memo.chains(RUN, *_pieces(rows))
    if change == "same length":
        rows[1] = _row(b'{"role":"assistamt"}')
    elif change == "replayed row":
        rows[2] = rows[0]
    elif change == "swapped rows":
        rows[0], rows[1] = rows[1], rows[0]
    else:  # the first row's bytes differ: the rows after it follow another chain value
        rows[0] = _row(b'{"role":"usex"}')
    pieces, bodies = _pieces(rows)
    expected = codec.extend_chain(codec.EMPTY_CHAIN, bodies)
    hashed.clear()
    assert memo.chains(RUN, pieces, bodies) == expected
    assert sum(hashed) >= 1


@settings(max_examples=200, deadline=None)
@given(
    loads=st.lists(
        st.lists(st.lists(st.sampled_from([b"a", b"b", b"ab", b"{}"]), min_size=1, max_size=3), max_size=5),
        min_size=1,
        max_size=5,
    )
)
def test_any_sequence_of_loads_gets_the_chain_hashing_gets(loads: list[list[list[bytes]]]) -> None:
    """Rows appended, replaced, dropped or reordered between loads: always the hashed chain."""
    memo = VerifiedRows(second_sight=False)
    for rows in loads:
        pieces, bodies = _pieces([_row(*row) for row in rows])
        assert memo.chains(RUN, pieces, bodies) == codec.extend_chain(codec.EMPTY_CHAIN, bodies)


def test_the_memo_is_bounded_by_the_bytes_it_keeps() -> None:
    memo = VerifiedRows(max_bytes=100, second_sight=False)
    for run in ("a", "b", "c"):
        memo.chains(run, *_pieces([_row(b"x" * 40)]))
    assert list(memo._groups) == ["b", "c"]
    memo.chains("big", *_pieces([_row(b"y" * 101)]))  # larger than the bound: not kept
    assert "big" not in memo._groups
    assert memo._total == sum(memo._size.values()) <= 100


def test_a_second_sight_memo_keeps_a_group_from_its_second_learning_on() -> None:
    memo: verified.RowMemo[int, bytes] = verified.RowMemo(100, len, second_sight=True)
    memo.learn("a", {0: b"row"})
    assert memo.group("a") == {}  # a first load keeps no copy
    assert memo._total == 0
    memo.learn("a", {0: b"row"})
    assert memo.group("a") == {0: b"row"}
    memo.learn("a", {1: b"next"})  # a kept group learns at once
    assert memo.group("a") == {0: b"row", 1: b"next"}


def test_an_encrypted_first_load_keeps_no_opened_row(tmp_path: Path) -> None:
    with safepoint.open_store(f"sqlite:///{tmp_path / 'sealed.db'}", encryption=keyring()) as store:
        _grow(store)
        opened = store.settings.sealer._opened_rows  # type: ignore[union-attr]
        opened._reset_after_fork()  # as a fresh process finds it
        first = store.load(RUN).messages
        assert opened._total == 0
        assert store.load(RUN).messages == first
        assert opened._total > 0  # the second load of the run keeps them
        assert store.load(RUN).messages == first


# -- through a store: rows replaced by raw SQL after loads verified them ------------------------


def _grow(store: Store, steps: int = 4) -> None:
    cp = Checkpoint(run_id=RUN)
    for step in range(steps):
        cp.step = step
        cp.messages.append({"role": "user", "content": f"question {step}"})
        cp.messages.append({"role": "assistant", "content": f"answer {step}"})
        store.save(cp)


@pytest.fixture(params=["sqlite", "sqlite-encrypted", "postgres"])
def rows(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Callable[..., Any]]]:
    """A store and ``sql(statement, params)`` on its database (named parameters: ``%(x)s``)."""
    if request.param.startswith("sqlite"):
        import sqlite3  # noqa: PLC0415

        path = tmp_path / "memo.db"

        def sqlite_sql(statement: str, params: dict[str, Any] | None = None) -> list[Any]:
            with sqlite3.connect(path) as conn:
                found = conn.execute(statement.replace("%(", ":").replace(")s", ""), params or {}).fetchall()
            conn.close()
            return found

        options = {"encryption": keyring()} if request.param == "sqlite-encrypted" else {}
        with safepoint.open_store(f"sqlite:///{path}", **options) as store:
            yield store, sqlite_sql
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema, safepoint.open_store(f"{dsn}?schema={schema}") as store:
        yield store, lambda statement, params=None: raw(dsn, schema, statement, params)


def _messages(sql: Callable[..., Any], step: int) -> bytes:
    ((packed,),) = sql(f"SELECT messages FROM safepoint_checkpoints WHERE step = {step}")  # test SQL
    return bytes(packed)


def _put(sql: Callable[..., Any], step: int, packed: bytes) -> None:
    sql(f"UPDATE safepoint_checkpoints SET messages = %(m)s WHERE step = {step}", {"m": packed})


@pytest.mark.parametrize("change", ["same length", "older row replayed", "rows swapped"])
def test_a_row_replaced_after_loads_verified_it_is_caught(
    rows: tuple[Store, Callable[..., Any]], hashed: list[int], change: str
) -> None:
    store, sql = rows
    _grow(store)
    for _ in range(2):
        store.load(RUN)
    hashed.clear()
    store.load(RUN)
    assert hashed == [], "a load of rows it has verified hashes none"
    one, two = _messages(sql, 1), _messages(sql, 2)
    if change == "same length":  # the digest and every other column untouched
        sealed = store.settings.sealer is not None
        _put(sql, 2, flipped(two) if sealed else two.replace(b"answer 2", b"answer 9"))
    elif change == "older row replayed":  # an earlier row's bytes, which the memo verified too
        _put(sql, 2, one)
    else:
        _put(sql, 1, two)
        _put(sql, 2, one)
    for step in (None, 3):
        with pytest.raises(CorruptCheckpoint):
            store.load(RUN, step)
    _put(sql, 1, one)
    _put(sql, 2, two)
    assert store.load(RUN).messages[5]["content"] == "answer 2"  # the memo kept nothing wrong


def test_the_module_bound_is_the_stores() -> None:
    with safepoint.open_store("memory://") as store:
        assert store.settings.verified.max_bytes == verified.MAX_BYTES
