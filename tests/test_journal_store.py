"""The call journal's store primitive through the public API (issue 32, item 1), on every
backend, sync and ``AsyncStore``: put if absent (an intent, then the result; the first
result wins and a second writer gets it back), the step an entry belongs to, the request's
digest, fencing by the run's lease, usage, and bad input refused with typed errors that
never quote a value.

Lifetime (retention, delete, gc), races and cost are in ``test_journal_store_lifetime.py``
and ``test_journal_store_races.py``; sealing in ``test_journal_store_sealed.py``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from journal_stores import VARIANTS, Backend, backends, quoted, started
from safepoint import InvalidArgument, LeaseLost, NotFound, NotJSONCompatible, RunHeld
from safepoint.journal import CallUsage, Recorded


@pytest.fixture(params=VARIANTS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backends(request.param, tmp_path)


def test_an_intent_then_its_result_each_put_if_absent(backend: Backend) -> None:
    store = backend.open()
    started(store, "run", 3)  # head 2: the entries belong to step 3
    intent = store.call_intent("run", "pay#1", request={"amount": 5})
    assert isinstance(intent, Recorded)
    assert (intent.state, intent.step, intent.written, intent.result, intent.done) == (
        "intent",
        3,
        True,
        None,
        False,
    )
    assert intent.done_at is None
    assert intent.created_at is not None
    again = store.call_intent("run", "pay#1", request={"amount": 5})
    assert (again.state, again.written, again.created_at) == ("intent", False, intent.created_at)
    found = store.recorded_call("run", "pay#1")
    assert found is not None
    assert (found.state, found.result, found.written) == ("intent", None, False)

    done = store.record_call("run", "pay#1", {"paid": 5}, request={"amount": 5})
    assert (done.state, done.result, done.written, done.step, done.done) == (
        "done",
        {"paid": 5},
        True,
        3,
        True,
    )
    assert done.done_at is not None
    assert done.created_at == intent.created_at  # the intent's row, completed
    late = store.record_call("run", "pay#1", {"paid": 6})
    assert (late.state, late.result, late.written) == ("done", {"paid": 5}, False)
    after = store.call_intent("run", "pay#1")  # an intent after the result changes nothing
    assert (after.state, after.result, after.written) == ("done", {"paid": 5}, False)
    entries = store.recorded_calls("run")
    assert [(e.key, e.state, e.result) for e in entries] == [("pay#1", "done", {"paid": 5})]


def test_the_first_result_wins_without_an_intent(backend: Backend) -> None:
    store = backend.open()
    started(store, "run")
    first = store.record_call("run", "model#1", {"text": "first"})
    second = store.record_call("run", "model#1", {"text": "second"})
    assert (first.written, second.written) == (True, False)
    assert second.result == {"text": "first"}
    assert second.done_at == first.done_at
    found = store.recorded_call("run", "model#1")
    assert found is not None
    assert found.result == {"text": "first"}
    assert store.recorded_call("run", "model#2") is None
    for falsy in (None, 0, "", [], {}, False):  # a falsy result is a result, kept as given
        key = f"falsy-{falsy!r}"
        assert store.record_call("run", key, falsy).result == falsy
        assert store.record_call("run", key, "later").result == falsy


def test_an_entry_belongs_to_the_step_after_the_head(backend: Backend) -> None:
    store = backend.open()
    cp = started(store, "run", 2)
    assert store.record_call("run", "a", 1).step == 2
    assert store.call_intent("run", "b").step == 2
    cp = cp.next()
    cp.messages.append({"role": "assistant", "content": "step 2"})
    store.save(cp)  # the checkpoint that covers a and b: the head is 2 now
    assert store.record_call("run", "c", 3).step == 3
    # An intent completed after the save keeps its step: the checkpoint that covered the
    # intent covers its result, and a saved step's entries never change in number.
    assert store.record_call("run", "b", 2).step == 2
    assert store.recorded_call("run", "a").step == 2  # type: ignore[union-attr]
    assert sorted(e.key for e in store.recorded_calls("run", step=2)) == ["a", "b"]
    assert [e.key for e in store.recorded_calls("run", step=3)] == ["c"]
    assert store.recorded_calls("run", step=9) == []
    assert [e.step for e in store.recorded_calls("run")] == [2, 2, 3]  # by step, oldest first
    # The checkpoint names how many entries it covers (for verify): step 2's two.
    rows = backend.raw("SELECT step, calls FROM safepoint_checkpoints ORDER BY step")
    assert [tuple(row) for row in rows] == [(0, 0), (1, 0), (2, 2)]


def test_same_request_compares_digests(backend: Backend) -> None:
    store = backend.open()
    started(store, "run")
    asked = {"messages": [{"role": "user", "content": "hi"}], "model": "m", "n": 1}
    store.record_call("run", "with", "answer", request=asked)
    store.record_call("run", "without", "answer")
    reordered = {"n": 1, "model": "m", "messages": [{"content": "hi", "role": "user"}]}
    for request, same in ((asked, True), (reordered, True), ({**asked, "n": 2}, False), (None, None)):
        found = store.recorded_call("run", "with", request=request)
        assert found is not None
        assert found.same_request is same
    found = store.recorded_call("run", "without", request=asked)
    assert found is not None
    assert found.same_request is None  # nothing to compare with
    assert all(e.same_request is None for e in store.recorded_calls("run"))
    # The request is kept as a digest only: its text is nowhere in the rows.
    secret_request = {"prompt": "REQUEST-TEXT-NEVER-STORED"}
    store.record_call("run", "digest-only", 1, request=secret_request)
    cells = backend.raw("SELECT * FROM safepoint_calls")
    assert not any(b"REQUEST-TEXT-NEVER-STORED" in _bytes(cell) for row in cells for cell in row)


def test_a_missing_run_is_not_found(backend: Backend) -> None:
    store = backend.open()
    started(store, "present")
    for call in (
        lambda: store.record_call("absent", "k", 1),
        lambda: store.call_intent("absent", "k"),
        lambda: store.recorded_calls("absent"),
    ):
        with pytest.raises(NotFound):
            call()
    assert store.recorded_call("absent", "k") is None
    assert backend.raw("SELECT count(*) FROM safepoint_calls") == [(0,)]


def test_a_lease_fences_the_journal_like_a_save(backend: Backend) -> None:
    store = backend.open()
    started(store, "run")
    lease = store.hold_run("run", "worker-a", lease=60)
    with pytest.raises(RunHeld):
        store.record_call("run", "k", 1)  # no lease while another lives
    with pytest.raises(RunHeld):
        store.call_intent("run", "k")
    intent = store.call_intent("run", "k", lease=lease)
    assert (intent.writer, intent.epoch, intent.writer_live) == ("worker-a", lease.epoch, True)
    done = store.record_call("run", "k", "result", lease=lease)
    assert (done.written, done.writer, done.epoch) == (True, "worker-a", lease.epoch)
    started(store, "other")
    with pytest.raises(InvalidArgument):
        store.record_call("other", "k", 1, lease=lease)  # a lease for another run
    store.release_hold(lease)
    found = store.recorded_call("run", "k")
    assert found is not None
    assert (found.writer, found.writer_live) == ("worker-a", False)
    with pytest.raises(LeaseLost):
        store.record_call("run", "k2", 1, lease=lease)  # given back: no longer the run's
    assert store.record_call("run", "k2", 2).written  # free now: written without a lease
    assert store.recorded_call("run", "k2").writer is None  # type: ignore[union-attr]


def test_a_stale_lease_is_lost_and_writes_nothing(backend: Backend) -> None:
    store = backend.open()
    started(store, "run")
    store.enqueue("run")
    old = store.claim("old", lease=0.05)
    assert old is not None
    intent = store.call_intent("run", "pay", lease=old)
    time.sleep(0.1)
    found = store.recorded_call("run", "pay")
    assert found is not None
    assert found.writer_live is False  # its writer's lease has expired
    new = store.claim("new", lease=60)
    assert new is not None
    assert new.epoch == old.epoch + 1
    for call in (
        lambda: store.record_call("run", "pay", "from the old owner", lease=old),
        lambda: store.call_intent("run", "other", lease=old),
    ):
        with pytest.raises(LeaseLost) as caught:
            call()
        assert "new" not in str(caught.value).split()  # worker ids are never quoted
    found = store.recorded_call("run", "pay")
    assert found is not None
    assert (found.state, found.writer, found.epoch) == ("intent", "old", intent.epoch)
    assert store.recorded_call("run", "other") is None
    done = store.record_call("run", "pay", "from the new owner", lease=new)
    assert (done.written, done.result) == (True, "from the new owner")
    assert (done.writer, done.epoch) == ("old", old.epoch)  # the intent's writer stays named


def test_usage_is_kept_with_the_entry(backend: Backend) -> None:
    store = backend.open()
    started(store, "run")
    used = CallUsage(tokens_in=120, tokens_out=30, spend=0.0042)
    assert store.record_call("run", "m", {"t": 1}, usage=used).usage == used
    assert store.recorded_call("run", "m").usage == used  # type: ignore[union-attr]
    assert store.record_call("run", "n", 1).usage is None
    assert store.record_call("run", "m", 2, usage=CallUsage(1, 1, 1.0)).usage == used  # first wins
    for bad in (
        {"tokens_in": 1},
        CallUsage(tokens_in=-1),
        CallUsage(tokens_out=1.5),  # type: ignore[arg-type]
        CallUsage(spend=float("nan")),
        CallUsage(spend=float("inf")),
        CallUsage(spend=-0.1),
        CallUsage(tokens_in=True),
    ):
        with pytest.raises(InvalidArgument):
            store.record_call("run", "bad-usage", 1, usage=bad)
    assert store.recorded_call("run", "bad-usage") is None


HIDDEN = "HIDDEN-VALUE-7f3a"  # in every refused value: no error message may quote it


def test_bad_input_is_refused_typed_and_unquoted(backend: Backend) -> None:
    store = backend.open()
    started(store, "run")
    bad_keys: list[Any] = [None, 7, b"key", "", "k" * 1025, f"{HIDDEN}\x00", f"{HIDDEN}\ud800", ["k"]]
    for key in bad_keys:
        for call in (
            lambda k=key: store.record_call("run", k, 1),
            lambda k=key: store.call_intent("run", k),
            lambda k=key: store.recorded_call("run", k),
        ):
            with pytest.raises(InvalidArgument) as caught:
                call()
            assert quoted(caught.value, [HIDDEN, "k" * 20]) == []
    bad_results: list[Any] = [
        {HIDDEN},
        {"a": [HIDDEN, {"b": object()}]},  # a path names keys (as a checkpoint's does), never values
        {"n": float("nan")},
        {"k": {1: HIDDEN}},
        HIDDEN + "\ud800",
        2**70,
        (HIDDEN,),
    ]
    for result in bad_results:
        with pytest.raises(NotJSONCompatible) as caught:
            store.record_call("run", "bad-result", result)
        assert caught.value.path.startswith("result"), caught.value.path
        assert quoted(caught.value, [HIDDEN]) == []
    # NaN and infinity encode as null: refused, or {"t": nan} would pass for {"t": None}.
    for request in ({HIDDEN}, {"a": object()}, float("inf"), {"t": [float("nan")]}):
        for call in (
            lambda r=request: store.record_call("run", "bad-request", 1, request=r),
            lambda r=request: store.call_intent("run", "bad-request", request=r),
            lambda r=request: store.recorded_call("run", "bad-request", request=r),
        ):
            with pytest.raises(NotJSONCompatible) as caught:
                call()
            assert caught.value.path == "request"
            assert quoted(caught.value, [HIDDEN]) == []
    for run_id in ("", "x" * 5000, "a\x00b"):
        with pytest.raises(InvalidArgument):
            store.record_call(run_id, "k", 1)
    for resolve in ("yes", 1):
        with pytest.raises(InvalidArgument):
            store.recorded_call("run", "k", resolve_secrets=resolve)
    assert store.recorded_calls("run") == []  # nothing refused was written


def _bytes(cell: Any) -> bytes:
    if isinstance(cell, bytes | bytearray | memoryview):
        return bytes(cell)
    return str(cell).encode()
