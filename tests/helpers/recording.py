"""An observer that keeps the statements a store ran (its trace hook), and nothing else."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from safepoint.observe import Attributes


class StatementLog:
    """A QueryObserver keeping each statement's name and row count; spans and metrics do nothing."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, int]] = []

    def span(self, name: str, attributes: Attributes) -> Any:
        return nullcontext()

    def add(self, metric: str, value: int | float, attributes: Attributes) -> None:
        pass

    def record(self, metric: str, value: int | float, attributes: Attributes) -> None:
        pass

    def query(self, name: str, seconds: float, attributes: Attributes) -> None:
        self.ran.append((name, int(attributes.get("safepoint.rows", 0))))

    def take(self) -> list[str]:
        """The names of the statements run since the last take, in order."""
        taken, self.ran = self.ran, []
        return [name for name, _rows in taken]
