"""The run row's counters as a column: exactly what ``load()`` gives, on every backend.

PostgreSQL keeps the run row's counters in a jsonb column, and jsonb keeps
numbers as ``numeric``, which has no negative zero (``-0.0`` reads back as
``0.0``) and writes a float without its exponent (``1e16`` reads back as the
int ``10000000000000000``). A float that would not survive is therefore
written inside ``{"$exact": "<the counters' canonical JSON>"}``: counters are
numbers only (validation refuses anything else), so a string value can only
be this wrapper. Keys come back sorted, as the checkpoint's canonical bytes
hold them (jsonb orders them by length). SQLite reads counters from the head
checkpoint's header and never writes this column.
"""

from __future__ import annotations

import math
from typing import Any

from safepoint import codec

EXACT = "$exact"


def column_text(counters: dict[str, Any]) -> str:
    """The JSON text to store in the run row's counters column."""
    text = codec.encode(counters).decode()
    if any(type(value) is float and not _numeric_keeps(value) for value in counters.values()):
        return codec.encode({EXACT: text}).decode()
    return text


def from_column(decoded: Any) -> Any:
    """The counters a decoded column value stands for (anything else as it is, for the caller to judge)."""
    if type(decoded) is not dict:
        return decoded
    if len(decoded) == 1 and type(decoded.get(EXACT)) is str:
        decoded = codec.decode(decoded[EXACT])
        if type(decoded) is not dict:
            raise TypeError("not a dict")
    return dict(sorted(decoded.items()))


def _numeric_keeps(value: float) -> bool:
    """Whether jsonb's numeric gives ``value`` back as the same float."""
    return b"e" not in codec.encode(value) and not (value == 0 and math.copysign(1.0, value) < 0)
