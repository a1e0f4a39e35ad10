"""ADK values as stored JSON: events through pydantic, state split by scope.

An event is stored as ``Event.model_dump(mode="json", exclude_none=True)``
and read back with ``Event.model_validate`` — pydantic's own JSON form, never
pickle. A value pydantic cannot put into JSON (an arbitrary object in a state
delta) is refused with ``NotJSONCompatible`` naming where it sits, not
stringified as ADK's database services do, so what is stored is what loads.
"""

from __future__ import annotations

from typing import Any

from google.adk.events.event import Event
from google.adk.sessions.state import State
from pydantic_core import PydanticSerializationError, to_jsonable_python

from safepoint import NotJSONCompatible


def event_to_json(event: Event) -> dict[str, Any]:
    """The event as plain JSON data (``NotJSONCompatible`` naming the field that is not)."""
    # ADK's own serializer would store such a state value as its repr, silently: refuse it first.
    state_to_json(event.actions.state_delta if event.actions else {}, "event.actions.state_delta")
    try:
        data: dict[str, Any] = event.model_dump(mode="json", exclude_none=True)
    except PydanticSerializationError:
        raise _first_bad(event) from None
    return data


def event_from_json(data: Any) -> Event:
    """The event a stored dict holds."""
    return Event.model_validate(data)


def state_to_json(state: dict[str, Any], path: str) -> dict[str, Any]:
    """``state`` as plain JSON data: each value through pydantic's JSON conversion."""
    converted: dict[str, Any] = {}
    for key, value in state.items():
        try:
            converted[key] = to_jsonable_python(value)
        except PydanticSerializationError:
            # The key is a name the caller chose; the value is never shown.
            reason = f"a {type(value).__name__} is not JSON data"
            raise NotJSONCompatible(f"{path}[{key!r}]", reason) from None
    return converted


def split_scopes(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``state`` as (app, user, session) parts, prefixes removed; ``temp:`` keys dropped."""
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    session: dict[str, Any] = {}
    for key, value in state.items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            session[key] = value
    return app, user, session


def merged(app: dict[str, Any], user: dict[str, Any], session: dict[str, Any]) -> dict[str, Any]:
    """A session's state as ADK hands it out: its own keys, then ``app:`` and ``user:`` ones."""
    state = dict(session)
    state.update({State.APP_PREFIX + key: value for key, value in app.items()})
    state.update({State.USER_PREFIX + key: value for key, value in user.items()})
    return state


def _first_bad(event: Event) -> NotJSONCompatible:
    for name in type(event).model_fields:
        try:
            to_jsonable_python(getattr(event, name))
        except PydanticSerializationError:
            return NotJSONCompatible(f"event.{name}", "a value in it is not JSON data")
    return NotJSONCompatible("event", "a value in it is not JSON data")
