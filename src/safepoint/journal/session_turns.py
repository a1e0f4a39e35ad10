"""A session-style integration's turns: numbered in the session's saves, opened and closed by
two journal entries (the Agents SDK, ADK and Pydantic AI journals share them).

A *turn* is one call of the framework with a new user input. Its number
lives in the session's saves (a state key the integration names, stamped on
every save the turn makes) and in two entries of the session's run:
``turn:<n>``, written first (where the session stood when the turn began —
its length and counters — under the turn's input as its request), and
``turn:<n>:end``, written when the turn returned (its counters). A turn with
a start and no end was cut by a crash, or is running: the same input again
resumes it, the session rolled back to where the start says it stood.
"""

from __future__ import annotations

from typing import Any

from safepoint.flow import RecordCall, RecordedCall
from safepoint.model import Checkpoint
from safepoint.records import Lease, Recorded
from safepoint.twins import Flow

__all__ = ["end_entry", "end_key", "last_open", "number_of", "start_entry", "start_key"]


def start_key(number: int) -> str:
    return f"turn:{number}"


def end_key(number: int) -> str:
    return f"turn:{number}:end"


def number_of(head: Checkpoint | None, state_key: str) -> int:
    """The number of the last turn that saved the session (0: none yet)."""
    value = None if head is None else head.state.get(state_key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def last_open(run_id: str, number: int, request: Any = None) -> Flow[tuple[int, Any, bool] | None]:
    """Turn ``number`` when it has a start and no end: (its number, its start, whether its input
    is ``request``); None when it ended, or never started."""
    if not number:
        return None
    end: Recorded | None = yield RecordedCall(run_id, end_key(number))
    if end is not None:
        return None
    start: Recorded | None = yield RecordedCall(run_id, start_key(number), request)
    if start is None:
        return None
    return number, start.result, request is not None and start.same_request is not False


def start_entry(run_id: str, number: int, start: Any, request: Any, lease: Lease | None) -> RecordCall:
    """The request writing turn ``number``'s start entry: ``start`` (where the session stood),
    under the turn's input ``request`` — put if absent, so a second writer learns the first's."""
    return RecordCall(run_id, start_key(number), start, request, None, lease)


def end_entry(run_id: str, number: int, counters: dict[str, Any], lease: Lease | None) -> RecordCall:
    """The request writing turn ``number``'s end entry, with the counters it ended with."""
    return RecordCall(run_id, end_key(number), {"counters": counters}, None, None, lease)
