"""What a store's earlier saves proved about a header's counter names, so a save does not prove it again.

Counter names are the header's keys that wake a rule on every save: a counter
named ``tokens_in`` holds the token rule's trigger, so the look over the
header says "walk" each time, though the walk finds nothing in it. A counter's
value is a number, never scrubbed; its name is scrubbed alone, as a string. So
once every name of a set came out of the steps unchanged, the same set does
again — the built-in steps are deterministic — until the registered secrets
change (a new value could be a counter's name). The memory is kept per
scrubber (one per store), keyed by the names in order, and only with the
built-in steps: a user's step need not be deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable

from .known import Secrets

_MAX_SETS = 256  # name sets remembered; cleared when full (a store's runs share a handful)


class ProvenNames:
    """The sets of counter names the steps are known to leave as they are."""

    def __init__(self, secrets: Secrets, *, enabled: bool) -> None:
        self._secrets = secrets
        self._enabled = enabled
        # Each entry carries the secrets' version it was proved under: an entry from before a change
        # never matches again, without a clear that could race with a save proving names meanwhile.
        self._sets: set[tuple[int, tuple[str, ...]]] = set()

    def holds(self, names: Iterable[str]) -> bool:
        """Whether these names (in this order) are known to be left as they are."""
        return self._enabled and (self._secrets.version, tuple(names)) in self._sets

    def add(self, names: Iterable[str], version: int) -> None:
        """Remember that the steps left these names as they are, under secrets ``version``
        (read before the names were looked at: a change meanwhile leaves the entry unused)."""
        if not self._enabled:
            return
        if len(self._sets) >= _MAX_SETS:
            self._sets = set()
        self._sets.add((version, tuple(names)))
