"""The checkpoint row as every operation writes it: one builder, and the run row's counters column.

``checkpoint_row`` is the one place a checkpoint's columns are made from its
header fields and message plan — for a save, a fork and a rewrite of the head
(and any later rewrite of history): the canonical header and its digest (from
``stored.py``, the stored format), the message ranges and carriers, the chain
values and the packed new bodies. Each operation adds the columns only it
knows (the run's reference, the first new seq, a fork's parent).
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from safepoint import codec
from safepoint.model import Checkpoint, ScrubReport

from .references import FORMAT
from .stored import StoredFields, header_bytes, pack_bodies

# The run row's counters as a column: exactly what ``load()`` gives, on every backend.
#
# PostgreSQL keeps the run row's counters in a jsonb column, and jsonb keeps
# numbers as ``numeric``, which has no negative zero (``-0.0`` reads back as
# ``0.0``) and writes a float without its exponent (``1e16`` reads back as the
# int ``10000000000000000``). A float that would not survive is therefore
# written inside ``{"$exact": "<the counters' canonical JSON>"}``: counters are
# numbers only (validation refuses anything else), so a string value can only
# be this wrapper. Keys come back sorted, as the checkpoint's canonical bytes
# hold them (jsonb orders them by length). SQLite reads counters from the head
# checkpoint's header and never writes this column.


EXACT = "$exact"


def checkpoint_row(
    cp: Checkpoint,
    fields: StoredFields,
    *,
    created_at: int,
    count: int,
    chain: bytes,
    report: ScrubReport | None,
    ranges: list[tuple[int, int]],
    carriers: list[tuple[int, int]] | None,
    chains: bytes | None,
    bodies: list[bytes],
    stored_format: int = FORMAT,
    labels: str | None = None,
) -> dict[str, Any]:
    """The columns of ``cp``'s checkpoint row (and the run row's labels and counters).

    ``fields`` are the header fields as stored (scrubbed); ``count`` and
    ``chain`` the message count and chain value the header pins; ``bodies``
    the stored message bodies the row carries; ``chains`` their chain values
    joined (None when the row has none); ``labels`` the labels' JSON text
    when the caller has it already.
    """
    header = header_bytes(
        cp,
        fields,
        created_at=created_at,
        count=count,
        chain=chain,
        report=report,
        stored_format=stored_format,
    )
    return {
        "step": cp.step,
        "schema_version": cp.schema_version,
        "status": cp.status._value_,  # the plain str (see header_bytes)
        "message_count": count,
        # Pairs of ints: orjson's own bytes are already the canonical ones.
        "ranges": orjson.dumps(ranges).decode(),
        "carriers": None if carriers is None else orjson.dumps(carriers).decode(),
        "chains": chains or None,
        "header": header,
        "digest": codec.digest(header),
        # The new messages travel in the checkpoint's own row: one row, one
        # B-tree leaf per save, however many messages it adds.
        "added": len(bodies),
        "messages": pack_bodies(bodies),
        "labels": fields.labels_text() if labels is None else labels,
        "counters": column_text(fields.counters),
    }


def column_text(counters: dict[str, Any]) -> str:
    """The JSON text to store in the run row's counters column."""
    text = orjson.dumps(counters, option=orjson.OPT_SORT_KEYS).decode()  # numbers: no long string
    if float in map(type, counters.values()) and not all(
        _numeric_keeps(value) for value in counters.values() if type(value) is float
    ):
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
