"""What one save scrubbed, as a checkpoint carries it (``Checkpoint.scrub_report``): counts, never values.

The store sets it when it saves or loads a checkpoint; the header keeps it
(``to_json``) only when the scrubber replaced something.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ScrubReport:
    """What one save scrubbed: counts by rule and field path — never values."""

    counts: tuple[tuple[str, str, int], ...] = ()  # (rule, path, count), sorted

    @property
    def total(self) -> int:
        return sum(count for _, _, count in self.counts)

    def by_rule(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for rule, _, count in self.counts:
            out[rule] += count
        return dict(sorted(out.items()))

    def __bool__(self) -> bool:
        return bool(self.counts)

    def to_json(self) -> list[list[Any]]:
        return [[rule, path, count] for rule, path, count in self.counts]

    @classmethod
    def from_json(cls, data: Any) -> ScrubReport:
        return cls(tuple((str(r), str(p), int(c)) for r, p, c in data or ()))

    @classmethod
    def merge(cls, counters: Iterable[Counter[tuple[str, str]]]) -> ScrubReport:
        total: Counter[tuple[str, str]] = Counter()
        for counter in counters:
            if counter:  # most saves find nothing: skip Counter.update's own overhead
                total.update(counter)
        if not total:
            return _EMPTY_REPORT
        return cls(tuple(sorted((rule, path, n) for (rule, path), n in total.items())))


_EMPTY_REPORT = ScrubReport()
