"""The pieces the inspector's conversation view is made of, without a browser: step summaries as
differences of the timeline, call and result cards paired by call id within reach, and the rows of a
side-by-side diff (tests/test_ui_conversation.py drives the pages they make in Chromium)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from safepoint.conversation import chat_message
from safepoint.records import TimelinePoint
from safepoint.ui.chat import MESSAGES, REACH, conversation, reader
from safepoint.ui.sidebyside import MATCHED, field_rows, message_rows
from safepoint.ui.step_summary import summaries

HOSTILE = "<script>window.__pwned = 1</script>"


def test_step_summaries_are_differences_of_the_timeline() -> None:
    """Each step is measured against the one before: messages (fewer when rewritten), the tool-call
    counter a Run or a journal keeps, tokens, spend, seconds; a fork's first step is not measured, and
    a pending action shows only at the step where it changed."""

    at = datetime(2026, 1, 1, tzinfo=UTC)
    asks = {"kind": "input", "question": HOSTILE}
    points = [
        TimelinePoint(0, at, 1, {}, 10),
        TimelinePoint(
            1, at + timedelta(seconds=2.5), 4, {"tool_calls": 2, "tokens_in": 40, "spend": 0.5}, 10, asks
        ),
        TimelinePoint(
            2,
            at + timedelta(minutes=3),
            3,
            {"tool_calls": 2, "tokens_in": 40, "tokens_out": 5, "spend": 0.5},
            10,
            asks,
        ),
    ]
    newest, middle, first = summaries(points, 1, forked=False)
    assert (first.shown("messages_added"), first.shown("tool_calls"), first.took) == ("+1", "-", "-")
    assert (middle.shown("messages_added"), middle.shown("tool_calls"), middle.shown("tokens")) == (
        "+3",
        "+2",
        "+40",
    )
    assert (middle.shown("spend"), middle.took, middle.pending is not None) == ("+0.5", "2.5 s", True)
    assert middle.pending is not None
    assert middle.pending.asks == HOSTILE
    assert (newest.shown("messages_added"), newest.shown("tool_calls"), newest.shown("tokens")) == (
        "-1",
        "0",
        "+5",
    )
    assert (newest.took, newest.pending) == ("2 min 57 s", None)  # the same question: not again
    (forked,) = summaries(points[1:2], 1, forked=True)
    assert (forked.messages_added, forked.tokens, forked.took) == (None, None, "-")


def test_cards_pair_by_call_id_within_reach_and_say_so_when_not() -> None:
    """A call answered within reach of its page links to its result (on that page or the next); one
    answered too far, or never, says it has no result; the words are the decoders' own."""

    def asks(call_id: str) -> dict[str, Any]:
        return {
            "role": "assistant",
            "tool_calls": [{"id": call_id, "function": {"name": "f", "arguments": "{}"}}],
        }

    talk: list[Any] = [
        asks("near"),
        {"role": "tool", "tool_call_id": "near", "content": "n"},
        asks("far"),
        asks("never"),
    ]
    talk += [{"role": "user", "content": "x"}] * (MESSAGES + REACH)
    talk.append({"role": "tool", "tool_call_id": "far", "content": "too far"})
    bubbles = conversation(talk, {}, 1, lambda page: f"/p{page}")
    near, answer, far, never = (b.cards[0] for b in bubbles[:4])
    assert (near.kind, near.call_id, near.href) == ("call", "near", "#m-1")
    assert (answer.kind, answer.text, answer.href) == ("result", "n", "#m-0")
    assert (far.href, never.href) == (None, None)
    assert str(chat_message(talk[0]).parts[0]) == "call f() [near]"  # the words show and diff print
    (last,) = conversation(talk, {}, 2, lambda page: f"/p{page}")[-1:]
    assert last.side == "user"


def test_side_by_side_rows_say_what_happened_to_each_message_and_field() -> None:
    """Messages after the shared prefix are matched: kept, rewritten (words marked), added, removed;
    fields by path; too many messages to match show as removed then added."""

    read = reader({})
    old = [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "one two"},
        {"role": "user", "content": "kept"},
    ]
    new = [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "one three"},
        {"role": "user", "content": "kept"},
        {"role": "tool", "content": "t"},
    ]
    rows = message_rows(old, new, 1, read)
    assert [r.kind for r in rows] == ["same", "changed", "same", "added"]
    assert rows[1].left is not None
    assert rows[1].right is not None
    assert ("del", "two") in rows[1].left.pieces
    assert ("ins", "three") in rows[1].right.pieces
    assert [r.kind for r in message_rows(new, old, 1, read)] == ["same", "changed", "same", "removed"]
    many = [{"role": "user", "content": str(i)} for i in range(MATCHED + 1)]
    assert {r.kind for r in message_rows(many, many[:1], 0, read)} == {"changed", "removed"}
    changes = [
        {"path": "state.a", "before": None, "after": 1},
        {"path": "state.b", "before": "x", "after": None},
        {"path": "state.c", "before": "x y", "after": "x z"},
    ]
    assert [r.kind for r in field_rows(changes)] == ["added", "removed", "changed"]
