"""Checking stored checkpoints against a migration chain: what ``safepoint check`` and the test kit share.

``stored_keys`` lists every stored ``(run_id, step)``; ``check_one`` migrates
one stored checkpoint (in memory: nothing is written) and records the outcome
in a ``CheckReport``. ``safepoint check`` drives them over a store, and
``safepoint.testing.migrations`` builds ``check_all`` and
``assert_all_loadable`` on them. A report names run ids, steps and typed
errors only — never stored values.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from safepoint.errors import NotFound, SafepointError
from safepoint.migrations import MigrationChain
from safepoint.store import Store
from safepoint.store.admin import all_runs

__all__ = ["CheckFailure", "CheckReport", "check_one", "stored_keys"]

_PAGE_SIZE = 100  # runs per store.runs() page in stored_keys

JSONDict = dict[str, Any]


@dataclass(frozen=True, slots=True)
class CheckFailure:
    """One stored checkpoint that does not load or migrate, and the typed error saying why."""

    run_id: str
    step: int
    error: SafepointError

    def __str__(self) -> str:
        message = str(self.error)
        where = f"run {self.run_id!r} step {self.step}"
        # Most safepoint errors already start by naming the run and step.
        prefix = "" if message.startswith(where) else f"{where}: "
        return f"{prefix}{type(self.error).__name__}: {message}"


@dataclass(slots=True)
class CheckReport:
    """What checking a set of stored checkpoints against a chain found.

    ``versions`` counts the checkpoints checked by their stored
    schema_version. Errors in ``failures`` keep their chained causes but not
    their tracebacks, which would hold the checkpoints' data in memory.
    """

    checked: int = 0
    up_to_date: int = 0  # already at chain.current
    migrated: int = 0  # lifted to chain.current without error
    failures: list[CheckFailure] = field(default_factory=list)
    versions: Counter[int] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        """True when every checkpoint checked loads and migrates."""
        return not self.failures

    def summary(self) -> str:
        """One line of counts, then one line per failure."""
        noun = "checkpoint" if self.checked == 1 else "checkpoints"
        line = (
            f"checked {self.checked} {noun}: {self.up_to_date} at the current version, "
            f"{self.migrated} migrate, {len(self.failures)} fail"
        )
        return "\n".join([line, *(f"  {failure}" for failure in self.failures)])

    def fail(self, run_id: str, step: int, error: SafepointError) -> None:
        """Record a failure (for callers feeding the report themselves)."""
        self.failures.append(CheckFailure(run_id, step, _without_tracebacks(error)))


def _without_tracebacks(error: SafepointError) -> SafepointError:
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        link.__traceback__ = None
        link = link.__cause__ or link.__context__
    return error


def check_one(report: CheckReport, chain: MigrationChain, run_id: str, step: int, data: JSONDict) -> None:
    """Migrate one stored checkpoint and record the outcome in ``report``."""
    report.checked += 1
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(version, int) and not isinstance(version, bool):
        report.versions[version] += 1
    try:
        chain.migrate(data, run_id=run_id, step=step)
    except SafepointError as exc:
        report.fail(run_id, step, exc)
        return
    if version == chain.current:
        report.up_to_date += 1
    else:
        report.migrated += 1


def stored_keys(store: Store) -> Iterator[tuple[str, int]]:
    """Every ``(run_id, step)`` in ``store``: runs page by page, each run's history."""
    for run in all_runs(store, _PAGE_SIZE):
        try:
            history = store.history(run.run_id)
        except NotFound:
            continue  # deleted since the page was read
        for info in history:
            yield run.run_id, info.step
