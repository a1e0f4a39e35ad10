"""The backend conformance suite: DESIGN's invariants and the store API contract as tests,
for every store — subclass ``StoreConformance`` and give it ``store``, ``reopen`` and
``tamper`` fixtures (see ``invariants.py``).

``invariants.py`` holds the invariants, ``leases.py`` claims and fencing, ``journal.py``
the call journal, ``api.py`` the rest of the API; ``runs.py`` and ``query_log.py`` are what
they build runs and count queries with, for your own tests too.
"""

from __future__ import annotations

from .invariants import StoreConformance
from .query_log import QueryLog, messages_written
from .runs import Tamper, declaring, grow, snapshot

__all__ = ["QueryLog", "StoreConformance", "Tamper", "declaring", "grow", "messages_written", "snapshot"]
