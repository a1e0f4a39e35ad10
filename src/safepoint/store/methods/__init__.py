"""The call table: every public store method, written once, for ``Store`` and ``AsyncStore`` alike.

Each entry is the method as users see it — its signature and docstring —
with, above it, the span it is observed as (``store_calls.Spec``: name, the
parameters that give its attributes, what its result adds), and in its body
the ``Call`` it builds (``calls.py``). ``Store`` runs that call by blocking
on its driver, ``AsyncStore`` by awaiting it (``twins.py``); neither class
lists the methods again.

The entries are grouped by subject: runs and checkpoints (``checkpoints.py``),
the work queue (``queue.py``), holds on named runs (``holds.py``), the call
journal (``journal.py``) and its verify, export and import (``journal_stored.py``), upkeep
(``upkeep.py``). Adding a store method
is one entry in one of them, over its operation and the operation's named
queries in each dialect's ``queries.sql``.
"""

from __future__ import annotations

from .checkpoints import CheckpointMethods
from .holds import HoldMethods
from .journal import JournalMethods
from .journal_stored import StoredJournalMethods
from .queue import QueueMethods
from .upkeep import UpkeepMethods


class StoreMethods(
    CheckpointMethods, QueueMethods, HoldMethods, JournalMethods, StoredJournalMethods, UpkeepMethods
):
    """The methods ``Store`` and ``AsyncStore`` share."""

    @property
    def schema_version(self) -> int:
        """The checkpoint version this store writes and reads up to: the migration
        chain's current version, or ``open_store(schema_version=…)``, default 1.
        A new run starts at it; a newer checkpoint is ``SchemaTooNew``."""
        return self.settings.schema_version
