"""A conversation as the inspector draws it: bubbles by role, tool calls and their results as cards
paired by call id, and the pending action (or the question a run asks) where it stands.

The words are the frameworks' decoders' (``safepoint.conversation``): a run an adapter wrote is read
by that adapter's decoder, any other run's chat-shaped messages by the chat decoder (OpenAI,
Anthropic, LangChain shapes), and a message neither knows by ``readable.describe`` (its JSON). The
decoders mark a tool call and a tool result (``conversation.Part``) with the call id they pair by;
nothing here reads a message's fields itself. Plain data leaves: the templates escape all of it, and
its control and format characters are shown as escapes (``visible``: a bidi override or an ANSI
sequence in a message cannot make it read as something else; line breaks stay).

A page holds ``MESSAGES`` messages. A call whose result is not on its page (or a result whose call is
not) is looked for up to ``REACH`` messages beyond it, so a page costs a bounded number of decodes
whatever the conversation's length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from safepoint.conversation import Part, Turn, chat_message, decoder
from safepoint.frameworks import ADAPTER_LABEL
from safepoint.readable import describe, pending, question
from safepoint.visible import visible

MESSAGES = 200  # messages a page of a conversation shows
REACH = 200  # messages looked at beyond a page for the other card of a pair
# The roles a bubble is drawn for; any other (a hostile one too) is drawn as "other".
SIDES = frozenset({"user", "assistant", "tool", "system", "developer"})


@dataclass(frozen=True, slots=True)
class Card:
    """One part of a message: ``kind`` "text", "call" or "result"; for a call or a result its tool's
    name, its call id and where its partner is (``partner``: a message index, ``href`` its link)."""

    kind: str
    text: str
    name: str = ""
    call_id: str | None = None
    error: bool = False
    partner: int | None = None
    href: str | None = None


@dataclass(frozen=True, slots=True)
class Bubble:
    """One message: its place (0-based), its role as the decoder read it, its cards."""

    index: int
    role: str
    cards: tuple[Card, ...]

    @property
    def side(self) -> str:
        """The role's CSS name: one of ``SIDES`` (an ADK author's "assistant (agent)" by its first word)."""
        first = self.role.split(" ", 1)[0]
        return first if first in SIDES else "other"


@dataclass(frozen=True, slots=True)
class Pending:
    """The checkpoint's pending action in words, and what it asks while unanswered (else None)."""

    text: str
    asks: str | None


def reader(labels: Mapping[str, str]) -> Callable[[Any], Turn]:
    """How this run's messages are read: its adapter's decoder, else the chat decoder (and
    ``describe`` for a message that is not chat-shaped)."""
    return decoder(labels.get(ADAPTER_LABEL)) or _chat


def _chat(message: Any) -> Turn:
    turn = chat_message(message)
    if turn.role != "-":
        return turn
    role, text = describe(message)  # not chat-shaped: its JSON, never a bare "<part>"
    return Turn(role, (text,))


def pages_of(count: int) -> int:
    return max(1, -(-count // MESSAGES))


def conversation(
    messages: Sequence[Any],
    labels: Mapping[str, str],
    page: int,
    link: Callable[[int], str],
) -> list[Bubble]:
    """Page ``page`` (1-based, already in range) of ``messages`` as bubbles; ``link(page)`` is the
    path of a page of this same view (a card's partner on another page is linked there)."""
    read = reader(labels)
    start = (page - 1) * MESSAGES
    end = min(len(messages), start + MESSAGES)
    turns = {i: read(messages[i]) for i in range(start, end)}
    calls: dict[str, int] = {}
    results: dict[str, int] = {}
    _index(turns, calls, results)
    missing = set(calls) - set(results)
    for i in range(end, min(len(messages), end + REACH)):  # later results of this page's calls
        if not missing:
            break
        found = _index({i: read(messages[i])}, {}, results)
        missing -= found
    missing = set(results) - set(calls)
    for i in range(start - 1, max(-1, start - 1 - REACH), -1):  # earlier calls of this page's results
        if not missing:
            break
        found = _index({i: read(messages[i])}, calls, {})
        missing -= found
    return [
        Bubble(i, visible(turn.role), _cards(turn, calls, results, range(start, end), link))
        for i, turn in turns.items()
    ]


def _index(turns: Mapping[int, Turn], calls: dict[str, int], results: dict[str, int]) -> set[str]:
    """Notes where each call id is called and answered (the first of each), into ``calls`` and
    ``results``; returns the ids seen."""
    seen = set()
    for i, turn in turns.items():
        for part in turn.parts:
            if isinstance(part, Part) and part.call_id is not None:
                (calls if part.kind == "call" else results).setdefault(part.call_id, i)
                seen.add(part.call_id)
    return seen


def _cards(
    turn: Turn, calls: Mapping[str, int], results: Mapping[str, int], shown: range, link: Callable[[int], str]
) -> tuple[Card, ...]:
    """The turn's parts as cards; a call's or a result's partner linked on this page or on its own."""
    cards = []
    for part in turn.parts:
        if not isinstance(part, Part):
            if part:
                cards.append(Card("text", _shown(part)))
            continue
        found = results if part.kind == "call" else calls
        partner = found.get(part.call_id) if part.call_id is not None else None
        href = None
        if partner is not None:
            href = ("" if partner in shown else link(partner // MESSAGES + 1)) + f"#m-{partner}"
        call_id = None if part.call_id is None else visible(part.call_id)
        cards.append(
            Card(part.kind, _shown(part.detail), visible(part.name), call_id, part.error, partner, href)
        )
    return tuple(cards) or (Card("text", "(no content)"),)


def pending_of(action: Any) -> Pending | None:
    """A checkpoint's (or a timeline point's) pending action, as a card shows it."""
    if action is None:
        return None
    asks = question(action)
    return Pending(_shown(pending(action)), None if asks is None else _shown(asks))


def _shown(text: str) -> str:
    return visible(text, keep_newlines=True)
