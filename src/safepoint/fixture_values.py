"""Values in a fixture file, and the call journal entries that travel with its checkpoint.

A fixture writes every value the way the store keeps it (``safepoint.refs``):
what the store wrote — a secret reference, scrubbed text with its marks, a
blob link — as its single-``$`` object, any ``$`` key of the data with one
more ``$``, and ``bytes`` as ``{"$bytes": base64}`` (JSON has no bytes).

A run's recorded calls travel with its checkpoint (``Store.export_calls``):
each entry under ``"calls"`` with its key, step, state, result (a value as
above, large values inline), usage, redaction count, times, and the hex
digest of its request — ``null`` with ``"request_known": false`` when the
exporting store held only a keyed digest (an encrypted store). An import
starts a new run at step 0 from the checkpoint, so each entry's step is
counted from the checkpoint's: the calls the checkpoint covers, and earlier
ones, come in at step 0; the calls recorded after it (the ones a run
resumed from it replays) at step 1.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from safepoint.errors import InvalidArgument
from safepoint.records import CallCopy, CallUsage, Recorded
from safepoint.store.references import from_stored, to_stored

_BYTES_KEY = "$bytes"  # bytes in a fixture (JSON has none): written only here
_DIGEST_HEX = 64
_USAGE = ("tokens_in", "tokens_out", "spend")


def value_out(value: Any) -> Any:
    """A value as a fixture writes it: stored form, ``bytes`` as base64."""
    return _bytes_out(to_stored(value))


def value_in(data: Any) -> Any:
    """A fixture's value back: references typed, ``$`` keys unescaped, bytes decoded."""
    return from_stored(_bytes_in(data))


def _bytes_out(value: Any) -> Any:
    if isinstance(value, bytes):
        return {_BYTES_KEY: base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {k: _bytes_out(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bytes_out(v) for v in value]
    return value


def _bytes_in(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(_BYTES_KEY), str):
            try:
                return base64.b64decode(value[_BYTES_KEY], validate=True)
            except ValueError:
                raise InvalidArgument("a fixture's bytes value is not valid base64") from None
        return {k: _bytes_in(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bytes_in(v) for v in value]
    return value


def calls_out(copies: Sequence[CallCopy]) -> list[dict[str, Any]]:
    """The ``"calls"`` of a fixture: each entry ``export_calls`` gave, as JSON data."""
    out = []
    for copy in copies:
        entry, usage = copy.entry, copy.entry.usage
        out.append(
            {
                "key": entry.key,
                "step": entry.step,
                "state": entry.state,
                "request": None if copy.request_digest is None else copy.request_digest.hex(),
                "request_known": copy.request_known,
                "result": value_out(entry.result),
                "usage": None if usage is None else {name: getattr(usage, name) for name in _USAGE},
                "redacted": entry.redacted,
                "created_at": None if entry.created_at is None else entry.created_at.isoformat(),
                "done_at": None if entry.done_at is None else entry.done_at.isoformat(),
            }
        )
    return out


def calls_in(calls: Any, checkpoint_step: int, run_id: str, where: str) -> list[CallCopy]:
    """A fixture's ``"calls"`` as ``import_calls`` takes them, for the new run ``run_id`` whose
    step 0 is the fixture's checkpoint (at ``checkpoint_step``): steps counted from it.
    ``InvalidArgument`` naming ``where`` and the entry's index (never a value) if one is malformed."""
    if not isinstance(calls, list):
        raise InvalidArgument(f"{where}: the fixture's 'calls' is not a list")
    return [
        _copy(data, checkpoint_step, run_id, f"{where}: the fixture's calls[{i}]")
        for i, data in enumerate(calls)
    ]


def _copy(data: Any, checkpoint_step: int, run_id: str, where: str) -> CallCopy:
    if not isinstance(data, dict):
        raise InvalidArgument(f"{where} is not a dict")
    key, step, state = data.get("key"), data.get("step"), data.get("state")
    if type(key) is not str or type(step) is not int or state not in ("intent", "done"):
        raise InvalidArgument(f"{where} needs a str key, an int step and a state of intent or done")
    if not 0 <= step <= checkpoint_step + 1:
        raise InvalidArgument(f"{where} is of a step the checkpoint neither covers nor precedes")
    request, known = data.get("request"), data.get("request_known", True)
    if type(known) is not bool or not (request is None or _is_digest(request)):
        raise InvalidArgument(f"{where}'s request is not a digest")
    redacted = data.get("redacted", 0)
    if type(redacted) is not int or redacted < 0:
        raise InvalidArgument(f"{where}'s redacted count is not a non-negative int")
    entry = Recorded(
        run_id=run_id,
        key=key,
        step=max(0, step - checkpoint_step),
        state=state,
        result=value_in(data.get("result")) if state == "done" else None,
        usage=_usage(data.get("usage"), where),
        created_at=_moment(data.get("created_at"), where),
        done_at=_moment(data.get("done_at"), where),
        redacted=redacted,
    )
    return CallCopy(entry, None if request is None else bytes.fromhex(request), known)


def _is_digest(value: Any) -> bool:
    if type(value) is not str or len(value) != _DIGEST_HEX:
        return False
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True


def _usage(data: Any, where: str) -> CallUsage | None:
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) != set(_USAGE):
        raise InvalidArgument(f"{where}'s usage is not tokens_in, tokens_out and spend")
    return CallUsage(data["tokens_in"], data["tokens_out"], data["spend"])  # checked by the store


def _moment(data: Any, where: str) -> datetime | None:
    if data is None:
        return None
    try:
        moment = datetime.fromisoformat(data) if type(data) is str else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise InvalidArgument(f"{where}'s times are not ISO 8601 with a time zone")
    return moment
