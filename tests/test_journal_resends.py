"""A model call found in flight is noted before it is sent again (``model_call``'s marker), and
the markers are counted back (``safepoint.journal.resends``) — what every integration's lost
counters come from when a process dies between a re-send and its next save."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from journal_stores import started
from safepoint import Store, open_store
from safepoint.adapters.pydantic_ai.turn import counters_at
from safepoint.journal import CallUsage, Place, Recorded, Tally, holding, model_call, resends
from safepoint.records import Lease

USAGE = CallUsage(tokens_in=10, tokens_out=4, spend=0.5)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    started(opened, "run")
    yield opened
    opened.close()


def call(
    store: Store, lease: Lease | None, tally: Tally, key: str = "m", **options: Any
) -> tuple[str, list[str]]:
    """One model call at ``key`` under ``lease``; the markers the store held when it was sent."""
    seen: list[str] = []

    def send() -> str:
        seen.extend(e.key for e in store.recorded_calls("run") if resends.sent_key(e.key))
        return "answer"

    flow = model_call(
        Place("run", lease),
        key,
        {"asked": 1},
        send,
        encode=lambda value: value,
        decode=lambda value: value,
        usage_of=lambda _: USAGE,
        tally=tally,
        **options,
    )
    return holding.drive(store, flow), seen


def test_a_call_another_writer_left_in_flight_is_marked_before_it_is_sent_again(store: Store) -> None:
    first = store.hold_run("run", "writer-a", lease=60)
    store.call_intent("run", "m", request={"asked": 1}, lease=first)  # writer-a is killed here
    second = store.hold_run("run", "writer-b", lease=60, take_from="writer-a")
    tally = Tally()
    assert call(store, second, tally) == ("answer", ["m!resent:writer-b"])  # durable before the send
    assert (tally.called, tally.resent, tally.lost_tokens_in, tally.lost_spend) == (1, 1, 10, 0.5)
    marked = resends.counted(store.recorded_calls("run"))
    assert (marked.tally.resent, marked.tally.lost_tokens_in, marked.pending) == (1, 10, {})


def test_the_writers_own_failed_attempt_made_again_is_no_re_send(store: Store) -> None:
    lease = store.hold_run("run", "writer-a", lease=60)
    store.call_intent("run", "m", request={"asked": 1}, lease=lease)  # its attempt raised
    tally = Tally()
    assert call(store, lease, tally) == ("answer", [])
    assert (tally.called, tally.resent, tally.lost_tokens_in) == (1, 0, 0)
    assert resends.counted(store.recorded_calls("run")).tally.resent == 0


def test_without_a_lease_an_integration_tells_its_own_retry(store: Store) -> None:
    store.call_intent("run", "m", request={"asked": 1})
    store.call_intent("run", "n", request={"asked": 1})
    tally = Tally()
    assert call(store, None, tally, "m", retried=lambda found: True) == ("answer", [])
    assert tally.resent == 0
    assert call(store, None, tally, "n") == ("answer", ["n!resent:none"])  # can't tell: a crash
    assert tally.resent == 1


def entry(key: str, *, done: bool, usage: CallUsage | None = None) -> Recorded:
    return Recorded("run", key, 1, "done" if done else "intent", usage=usage)


def test_markers_are_counted_with_their_calls_usage_or_pending_until_it_is_recorded() -> None:
    entries = [
        entry("m", done=True, usage=USAGE),
        entry("m!resent:a", done=False),
        entry("m!resent:b", done=False),
        entry("n!resent:c", done=False),  # re-sent, then killed again: not recorded yet
        entry("tool|x!resent:y", done=True),  # a tool's result whose call id reads as a marker
        entry("tool|z!resent:w", done=False),  # ... or its intent: not a model call's key
    ]
    marked = resends.counted(entries, lambda key: not key.startswith("tool|"))
    assert (marked.tally.resent, marked.tally.lost_tokens_in, marked.tally.lost_spend) == (3, 20, 1.0)
    assert marked.pending == {"n": 1}
    assert resends.sent_key("m!resent:a") == "m"
    assert resends.sent_key("m") is None


def test_pydantic_ai_saves_count_the_notes_of_this_release_and_of_earlier_ones() -> None:
    call_key = "pai|s0|m0|model#0"
    entries = [
        entry(call_key, done=True, usage=USAGE),
        entry(f"{call_key}|resent|writer-a", done=False),  # as earlier releases noted a re-send
        entry(f"{call_key}!resent:writer-b", done=False),  # as model_call notes it now
    ]
    counters = counters_at(None, entries)
    assert (counters["model_calls"], counters["resent_calls"], counters["lost_tokens_in_estimate"]) == (
        1,
        2,
        20,
    )
