"""``Store``: the public face of a checkpoint store, over any driver.

The store validates and encodes outside the transaction (so a bad value is
refused before anything is written and the write lock is held briefly), then
hands one operation from ``ops`` to its driver.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Protocol, TypeVar

from safepoint.errors import InvalidArgument
from safepoint.model import Checkpoint, CheckpointInfo, Page, RunInfo, Status, new_run_id, to_micros

from . import ops
from .serialize import finish_save, plan_messages, validate_fields

T = TypeVar("T")


class Driver(Protocol):
    """What a backend provides: run one operation in one transaction.

    ``run`` must commit when the operation returns and roll back (changing
    nothing) when it raises; ``write=True`` operations must be serialized
    per run, so that the head-step check inside them cannot race.
    """

    dialect: str

    def run(self, op: ops.Op[T], *, write: bool) -> T: ...

    def close(self) -> None: ...


def now_micros() -> int:
    return time.time_ns() // 1000


class Store:
    """A checkpoint store. Open one with ``safepoint.open_store(url)``.

    Thread-safe; one ``Store`` per process is the usual pattern, and any
    number of processes may open the same SQLite file or PostgreSQL database.
    """

    def __init__(self, driver: Driver, *, url: str) -> None:
        self._driver = driver
        self.url = url

    @property
    def driver(self) -> Driver:
        """The backend driver (for tests and tools; not needed to use the store)."""
        return self._driver

    def save(self, checkpoint: Checkpoint) -> CheckpointInfo:
        """Store ``checkpoint`` as the next step of its run, atomically and durably.

        Only the next step is accepted: step 0 for a new run, head + 1 for an
        existing one; anything else raises ``Conflict`` and writes nothing. A
        value that is not JSON data raises ``NotJSONCompatible`` naming its path,
        before any write. On success the checkpoint object records what was
        stored (``created_at``, ``digest``), so saving it again as the next step
        writes only the messages added since.
        """
        cp = checkpoint
        validate_fields(cp)
        view = cp.stored_view
        if view is not None and view.run_id != cp.run_id:
            view = None
        plan = plan_messages(view, cp.messages)
        now = now_micros()
        result = self._driver.run(ops.save(cp, view, plan, now), write=True)
        finish_save(cp, result.plan, result.ranges, now, result.digest)
        assert cp.created_at is not None
        assert cp.digest is not None
        return CheckpointInfo(
            run_id=cp.run_id,
            step=cp.step,
            schema_version=cp.schema_version,
            status=cp.status,
            created_at=cp.created_at,
            message_count=result.plan.total,
            digest=cp.digest,
        )

    def load(self, run_id: str, step: int | None = None) -> Checkpoint:
        """The run's latest checkpoint, or the one at ``step``, verified.

        Raises ``NotFound`` (also a ``LookupError``) when the run or step does
        not exist and ``CorruptCheckpoint`` when stored rows fail the digest.
        Always two queries, however long the run.
        """
        return self._driver.run(ops.load(run_id, step), write=False)

    def history(self, run_id: str) -> list[CheckpointInfo]:
        """Every checkpoint of the run, oldest first (headers only, no messages)."""
        return self._driver.run(ops.history(run_id), write=False)

    def run(self, run_id: str) -> RunInfo:
        """The run's summary: status, head step, labels, counters, timestamps."""
        return self._driver.run(ops.run_info(run_id), write=False)

    def runs(
        self,
        *,
        status: Status | str | Iterable[Status | str] | None = None,
        labels: dict[str, str] | None = None,
        updated_since: datetime | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[RunInfo]:
        """Runs, newest first, filtered by status (one or several), labels (all
        must match) and last update; pass ``page.next_cursor`` back as
        ``cursor`` for the next page."""
        if not isinstance(limit, int) or limit < 1:
            raise InvalidArgument(f"limit must be a positive int, not {limit!r}")
        statuses = None if status is None else _statuses(status)
        items, more = self._driver.run(
            ops.list_runs(
                statuses=statuses,
                labels=labels,
                updated_since=None if updated_since is None else to_micros(updated_since),
                before_id=_decode_cursor(cursor),
                limit=limit,
            ),
            write=False,
        )
        return Page(items, None if more is None else _encode_cursor(more))

    def fork(
        self,
        run_id: str,
        step: int | None = None,
        *,
        new_run_id: str | None = None,
        labels: dict[str, str] | None = None,
    ) -> Checkpoint:
        """Start a new run from ``run_id``'s checkpoint at ``step`` (default: latest).

        The new run's history starts with a copy of that checkpoint, at the
        same step number, with ``parent`` recording where it came from; save
        ``fork.next()`` to continue it. Returns the new run's checkpoint.
        """
        target = new_run_id or new_run_id_default()
        probe = Checkpoint(run_id=target, labels=labels or {})
        validate_fields(probe)
        return self._driver.run(ops.fork(run_id, step, target, labels, now_micros()), write=True)

    def delete_run(self, run_id: str) -> None:
        """Delete the run, its checkpoints and messages; ``NotFound`` if absent."""
        self._driver.run(ops.delete_run(run_id), write=True)

    def close(self) -> None:
        """Release the connection(s). Using the store afterwards raises ``StoreClosed``."""
        self._driver.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<safepoint.Store {self.url}>"


new_run_id_default = new_run_id


def _statuses(status: Status | str | Iterable[Status | str]) -> list[str]:
    wanted = [status] if isinstance(status, str) else list(status)
    try:
        return [Status(s).value for s in wanted]
    except ValueError as exc:
        known = ", ".join(s.value for s in Status)
        raise InvalidArgument(f"unknown status in {wanted!r} (known: {known})") from exc


def _encode_cursor(row_id: int) -> str:
    return base64.urlsafe_b64encode(str(row_id).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return int(base64.urlsafe_b64decode(padded.encode()).decode())
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cursor {cursor!r} is not one this store returned") from exc
