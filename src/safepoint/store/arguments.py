"""Checks on what callers pass to store methods, before anything reaches a driver.

Every check raises ``InvalidArgument`` naming the argument (never quoting
its value: it may be a secret pasted in the wrong place) and returns the
value in the form the operations take. The bounds keep every value inside
what SQLite and PostgreSQL hold (64-bit integers; a lease's expiry is
microseconds), so nothing reaches a driver as an overflow.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from itertools import islice
from typing import Any

from safepoint import codec
from safepoint.errors import InvalidArgument
from safepoint.model import Status
from safepoint.records import Lease, Retention, to_micros
from safepoint.scrub import Secrets

from .validate import check_id

MAX_LIMIT = 10_000  # rows per page of ``runs``
MAX_LEASE = timedelta(days=365)  # a lease or heartbeat extension
MAX_EPOCH = 2**63 - 1
MAX_ROW_ID = 2**63 - 1  # what a cursor encodes
_MAX_CURSOR_CHARS = 32


def check_lease(lease: Any) -> None:
    """Refuse anything but a Lease with fields a store could have returned (naming the field only)."""
    if not isinstance(lease, Lease):
        raise InvalidArgument(f"lease must be a safepoint.Lease (from claim), not {type(lease).__name__}")
    check_id(lease.run_id, "lease.run_id")
    check_id(lease.worker_id, "lease.worker_id")
    if type(lease.epoch) is not int or not 0 <= lease.epoch <= MAX_EPOCH:
        raise InvalidArgument(f"lease.epoch must be an int from 0 to {MAX_EPOCH}")
    seconds(lease.duration, "lease.duration")


def resolver(value: Any) -> None:
    """``load``'s ``resolve_secrets``: a bool, a ``Secrets`` or a name -> value callable."""
    if not (type(value) is bool or isinstance(value, Secrets) or callable(value)):
        raise InvalidArgument(
            "resolve_secrets must be a bool, a safepoint.Secrets or a name -> value callable"
        )


def flag(value: Any, name: str) -> bool:
    if type(value) is not bool:
        raise InvalidArgument(f"{name} must be True or False, not {type(value).__name__}")
    return value


def policy(value: Any) -> Retention | None:
    if value is not None and not isinstance(value, Retention):
        raise InvalidArgument(f"policy must be a safepoint.Retention or None, not {type(value).__name__}")
    return value


def seconds(value: Any, name: str) -> float:
    """A lease duration: above 0 and at most ``MAX_LEASE``, in seconds."""
    return duration(value, name, low=None, high=MAX_LEASE).total_seconds()


def duration(value: Any, name: str, *, low: timedelta | None, high: timedelta) -> timedelta:
    """``value`` (seconds or a timedelta) as a timedelta within ``low`` (None: above 0) and ``high``."""
    kind = "positive" if low is None else "non-negative"
    problem = f"{name} must be a {kind} number of seconds or a timedelta, at most {high.days} days"
    if isinstance(value, timedelta):
        result = value
    elif type(value) in (int, float) and math.isfinite(value) and abs(value) <= high.total_seconds():
        result = timedelta(seconds=value)
    else:
        raise InvalidArgument(problem)
    if result > high or (result <= timedelta(0) if low is None else result < low):
        raise InvalidArgument(problem)
    return result


_KNOWN_STATUSES = ", ".join(s.value for s in Status)


def status(value: Any) -> Status:
    if type(value) is Status:
        return value
    if type(value) is str:
        for known in Status:
            if known.value == value:
                return known
    raise InvalidArgument(f"status must be a Status or the value of one ({_KNOWN_STATUSES})")


def statuses(value: Status | str | Iterable[Status | str]) -> list[str]:
    """One status or several, as the values ``runs`` filters on."""
    if isinstance(value, str):
        return [status(value).value]
    if not isinstance(value, Iterable) or isinstance(value, bytes | bytearray | Mapping):
        raise InvalidArgument(
            f"status must be a Status, the value of one, or a list of them ({_KNOWN_STATUSES})"
        )
    # More entries than statuses exist can only be a mistake: don't walk an endless iterable.
    wanted = list(islice(value, 2 * len(Status) + 1))
    if len(wanted) > 2 * len(Status):
        raise InvalidArgument("status lists at most each status once")
    return [status(s).value for s in wanted]


def limit(value: Any) -> int:
    if type(value) is not int or not 1 <= value <= MAX_LIMIT:
        raise InvalidArgument(f"limit must be an int from 1 to {MAX_LIMIT}")
    return value


def label_filter(labels: Any) -> dict[str, str] | None:
    """Labels ``runs`` can compare with stored ones: a dict of str to str (or None: any)."""
    if labels is not None and not (
        type(labels) is dict
        and all(type(k) is str and type(v) is str and "\x00" not in k + v for k, v in labels.items())
        and codec.is_plain_json(labels)
    ):
        raise InvalidArgument(
            "labels must be a dict of str to str, without NUL characters or lone surrogates"
        )
    return labels


def since(value: Any, name: str = "updated_since") -> int | None:
    """``runs``'s ``updated_since`` (or ``updated_until``) as microseconds (None: any time)."""
    if value is not None and not isinstance(value, datetime):
        raise InvalidArgument(f"{name} must be a datetime or None, not {type(value).__name__}")
    return None if value is None else to_micros(value)


def encode_cursor(row_id: int) -> str:
    return base64.urlsafe_b64encode(str(row_id).encode()).decode().rstrip("=")


def decode_cursor(cursor: Any) -> int | None:
    """The row id in a cursor this store returned; anything else is refused (never quoted)."""
    if cursor is None:
        return None
    row_id = None
    if type(cursor) is str and 0 < len(cursor) <= _MAX_CURSOR_CHARS and cursor.isascii():
        try:
            row_id = int(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii"))
        except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
            row_id = None
    # Only the exact text encode_cursor writes: int() also takes " 7", "+7" and "7_0".
    if row_id is None or not 0 <= row_id <= MAX_ROW_ID or encode_cursor(row_id) != cursor:
        raise InvalidArgument("cursor is not one this store returned: pass page.next_cursor back unchanged")
    return row_id
