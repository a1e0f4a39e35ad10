"""``run_counters``' rows opened on an encrypted store: the hot path of the cost view's sums.

A sum reads every run of the store (10,000 for one page), and each row holds
one sealed value: the run's counters (PostgreSQL: sealed for the run; SQLite:
the head checkpoint's sealed header, returned whole). ``sealed_ops`` opens
them here by position, without the dict and the checks its general way
makes per row for any query's columns. As a listing does, a value that does
not open comes back ``Unopened`` and the sum counts its run as unreadable;
an ``UnknownDataKey`` goes up, for ``sealed_ops`` to read the keys again.
"""

from __future__ import annotations

from safepoint import codec
from safepoint.errors import CorruptCheckpoint, MissingKey

from .query import Row, Unopened
from .sealer import Sealer

_BYTES = (bytes, bytearray, memoryview)


def opened_counts(rows: list[Row], sealer: Sealer) -> list[Row]:
    """Each (run_id, head_step, updated_at, counters) row with its counters as JSON text."""
    make, opened = type(rows[0]), []
    for run_id, step, updated_at, stored in rows:
        counters = stored
        try:
            if isinstance(stored, _BYTES):  # SQLite: the head's header; its counters taken out
                header = codec.decode(sealer.open(bytes(stored), run_id, step, "header"))
                if type(header) is not dict:
                    raise CorruptCheckpoint(run_id, step, "its header is not what a save writes")
                counters = codec.encode(header.get("counters")).decode()
            elif stored is not None:
                counters = sealer.open_json(stored, run_id, "counters")
        except (CorruptCheckpoint, MissingKey) as exc:
            counters = Unopened(type(exc).__name__)
        except (TypeError, ValueError):  # the header opened but is not JSON: as a damaged row
            counters = Unopened(CorruptCheckpoint.__name__)
        opened.append(make((run_id, step, updated_at, counters)))
    return opened
