"""``Store``: the public face of a checkpoint store, over any driver.

Each method is one line: build the shared ``Call`` (``calls.py``) and run it
on the driver. An async store does the same with ``await``. With an observer
(``open_store(url, observer=…)``) each call runs inside a span
(``traced.py``); without one, a single identity test skips all of that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, ParamSpec, TypeVar

from safepoint.model import Checkpoint, CheckpointInfo, Lease, Page, Retention, RunInfo, Status
from safepoint.observe import NO_OBSERVER, Observer

from . import calls, maintenance, traced
from .ops import leases
from .pipeline import Pipeline, ResolveSecrets
from .query import Driver

T = TypeVar("T")
P = ParamSpec("P")


class Store:
    """A checkpoint store. Open one with ``safepoint.open_store(url)``.

    Thread-safe; one ``Store`` per process is the usual pattern, and any
    number of processes may open the same SQLite file or PostgreSQL database.
    """

    def __init__(self, driver: Driver, *, url: str, pipeline: Pipeline | None = None) -> None:
        self._driver = driver
        self.url = url
        self.pipeline = pipeline if pipeline is not None else Pipeline()
        # Spans and metrics (``safepoint.observe``); ``open_store(observer=…)`` sets it.
        self.observer: Observer = NO_OBSERVER
        self._backend = traced.backend_of(url)

    @property
    def schema_version(self) -> int:
        """The checkpoint version this store writes and reads up to: the migration
        chain's current version, or ``open_store(schema_version=…)``, default 1.
        A new run starts at it; a newer checkpoint is ``SchemaTooNew``."""
        return self.pipeline.schema_version

    @property
    def driver(self) -> Driver:
        """The backend driver (for tests and tools; not needed to use the store)."""
        return self._driver

    def _run(self, call: calls.Call[Any, T]) -> T:
        if call.before is not None:  # slow I/O (blob uploads), before the transaction begins
            call.before()
        return call.finish(self._driver.run(call.op, write=call.write))

    def _call(self, build: Callable[P, calls.Call[Any, T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """Build the call and run it, inside the observer's span when there is one."""
        observer = self.observer
        if observer is NO_OBSERVER:
            return self._run(build(*args, **kwargs))
        with traced.operation(observer, self._backend, build, args, kwargs) as op:
            result = self._run(build(*args, **kwargs))
            traced.finished(build, op, result)
        return result

    def save(self, checkpoint: Checkpoint, *, lease: Lease | None = None) -> CheckpointInfo:
        """Store ``checkpoint`` as the next step of its run, atomically and durably.

        Only the next step is accepted: step 0 for a new run, head + 1 for an
        existing one; anything else raises ``Conflict`` and writes nothing. A
        value that is not JSON data raises ``NotJSONCompatible`` naming its path,
        before any write. On success the checkpoint object records what was
        stored (``created_at``, ``digest``), so saving it again as the next step
        writes only the messages added since.

        With ``lease`` (from ``claim``), the save is accepted only while that
        lease's epoch is still the run's current one — checked in the same
        transaction — and raises ``LeaseLost`` otherwise, changing nothing.

        Every field passes the store's scrubber first (registered secrets,
        token rules, opt-in PII); the returned info's ``scrub_report`` (also
        set on the checkpoint) counts what was replaced, by rule and path.
        Under the ``raise`` policy a finding refuses the save (``SecretLeak``).
        Without a lease, a run another worker holds a live lease on is a
        ``Conflict``.
        """
        observer = self.observer
        if observer is NO_OBSERVER:
            return self._run(calls.save(checkpoint, lease, self.pipeline))
        facts = calls.SaveFacts()
        attributes = traced.of_save(checkpoint, lease)
        with traced.Operation(observer, "safepoint.save", self._backend, attributes) as op:
            info = self._run(calls.observed_save(checkpoint, lease, self.pipeline, None, facts))
            traced.saved(op, facts)
        return info

    def load(
        self,
        run_id: str,
        step: int | None = None,
        *,
        resolve_secrets: ResolveSecrets = False,
        migrate: bool = True,
        fetch_blobs: bool = True,
    ) -> Checkpoint:
        """The run's latest checkpoint, or the one at ``step``, verified.

        What comes back is what was stored: secrets the scrubber replaced are
        references (``{"$secret": "NAME"}``) and markers (``[SECRET:NAME]``).
        With ``resolve_secrets`` — ``True`` for the store's registered
        ``Secrets``, or another ``Secrets`` or a ``name -> value`` callable (a
        vault lookup) — they are replaced by the values, in memory only;
        ``UnknownSecret`` names one the resolver lacks.

        With a migration chain (``open_store(url, migrations=chain)``) the
        checkpoint is run forward to the chain's current ``schema_version``;
        the stored rows are never changed by a load. ``migrate=False`` returns
        it as stored. ``SchemaTooNew`` when it was written by newer code;
        ``MigrationError`` (naming run, step and versions) when a migration fails.

        Raises ``NotFound`` (also a ``LookupError``) when the run or step does
        not exist and ``CorruptCheckpoint`` when stored rows fail the digest.
        Always two queries, however long the run.
        """
        return self._call(
            calls.load,
            run_id,
            step,
            self.pipeline,
            resolve_secrets=resolve_secrets,
            migrate=migrate,
            fetch_blobs=fetch_blobs,
        )

    def migrate_runs(self, run_ids: list[str]) -> maintenance.Rewritten:
        """Eagerly migrate these runs' latest checkpoints, in one transaction.

        Each head checkpoint is rewritten in place at the chain's current
        ``schema_version`` (messages the migration changed are appended as a
        new range; older checkpoints keep theirs and are migrated on read).
        Runs already current are left alone; a run whose migration fails is
        left unchanged and reported. ``safepoint migrate`` calls this in batches.
        """
        return self._call(calls.migrate_runs, run_ids, self.pipeline)

    def fetch_blob(self, ref: Any) -> str | bytes:
        """The value a blob reference stands for (from ``load(..., fetch_blobs=False)``).

        ``ref`` is the ``{"$blob": {…}}`` dict found in the checkpoint, or a
        ``BlobRef``. Text comes back as ``str``; the bytes are verified against
        the digest (``BlobCorrupt`` if altered, ``BlobNotFound`` if missing).
        """
        return self._call(calls.fetch_blob, ref, self.pipeline)

    def set_retention(self, run_id: str, policy: Retention | None) -> None:
        """Give one run its own retention policy (``None``: back to the store's)."""
        return self._call(calls.set_retention, run_id, policy)

    def prune_run(
        self, run_id: str, policy: Retention | None = None, *, dry_run: bool = False
    ) -> maintenance.PruneResult:
        """Apply retention to one run in one transaction: the run's own policy, else
        ``policy``, else the store's. Kept checkpoints all still load exactly.
        (``safepoint gc`` and ``prune_store`` call this for every run.)"""
        return self._call(calls.prune_run, run_id, policy, self.pipeline, dry_run)

    def collect_garbage(self, *, grace: float | timedelta = 0, dry_run: bool = False) -> maintenance.GcResult:
        """Delete blobs no stored row references (and older than ``grace``).

        Safe while saves run: it holds the blob guard that saves referencing
        blobs hold in their transaction until commit, and a save re-checks
        there the blobs it uploaded before (putting back any collected since).
        On SQLite it then gives the file's free pages back (``result.database``:
        the file's size before and after); a file created without incremental
        auto-vacuum keeps them until one ``vacuum()``. A dry run reads only.
        """
        return self._call(calls.collect_garbage, self.pipeline, grace, dry_run)

    def vacuum(self) -> maintenance.FileSpace:
        """Rewrite a SQLite file without its free pages, and switch it to incremental auto-vacuum.

        For a file created before safepoint created stores with incremental
        auto-vacuum: after this one full ``VACUUM``, ``collect_garbage`` gives
        freed pages back to the file system itself. It needs the database to
        itself for as long as it takes (saves wait, up to their busy timeout)
        and free disk space about the size of the file. ``InvalidArgument``
        on PostgreSQL, whose autovacuum reuses freed space.
        """
        return self._call(calls.vacuum, self._driver.dialect)

    def history(self, run_id: str) -> list[CheckpointInfo]:
        """Every checkpoint of the run, oldest first (headers only, no messages)."""
        return self._call(calls.history, run_id)

    def run(self, run_id: str) -> RunInfo:
        """The run's summary: status, head step, labels, counters, timestamps."""
        return self._call(calls.run_info, run_id)

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
        ``cursor`` for the next page. ``limit`` is 1 to 10,000; a bad status,
        limit or cursor raises ``InvalidArgument``."""
        return self._call(
            calls.runs, status=status, labels=labels, updated_since=updated_since, limit=limit, cursor=cursor
        )

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
        return self._call(calls.fork, run_id, step, new_run_id, labels, self.pipeline)

    def delete_run(self, run_id: str) -> None:
        """Delete the run: every checkpoint, its messages, the run row with its queue
        entry and lease, in one transaction; ``NotFound`` if absent.

        A worker holding the lease is fenced off (its next save, heartbeat or
        release raises ``LeaseLost``). Blobs only this run referenced stay
        until ``collect_garbage`` (``safepoint gc``). The id may be used again.
        """
        self._call(calls.delete_run, run_id)

    def enqueue(self, run_id: str) -> None:
        """Queue the run for workers to ``claim`` (idempotent); ``NotFound`` if absent."""
        self._call(calls.enqueue, run_id)

    def requeue(self, run_id: str) -> None:
        """Put the run back in the queue with its attempts reset; ``NotFound`` if absent.

        For a run a ``Worker`` quarantined (status ``failed`` after
        ``max_attempts``, its last error in ``run(run_id).last_error``):
        it becomes ``running`` and claimable again. Any other run is queued
        as ``enqueue`` would, its attempts and ``retry_at`` cleared. A live
        lease on the run is left alone.
        """
        self._call(calls.requeue, run_id)

    def cancel(self, run_id: str) -> leases.Cancelled:
        """Stop the run for good: status ``cancelled``, out of the queue, its lease holder fenced off.

        A worker holding a live lease is fenced: its next save, heartbeat or
        release raises ``LeaseLost`` and changes nothing. The cancellation is
        saved as one new checkpoint (the head's next step, status
        ``cancelled``, nothing else changed), so it shows in ``history``, a
        writer without a lease meets ``Conflict`` at its next save, and
        ``Run.resume`` comes back inactive. A head that cannot be loaded
        (corrupt) is cancelled on the run row alone. Cancelling a cancelled
        run changes nothing more; a ``done`` run raises ``RunStatusError``;
        ``NotFound`` if absent. Returns what was done (``leases.Cancelled``).
        """
        return self._call(calls.cancel, run_id, self.pipeline)

    def hidden_steps(self, run_id: str) -> list[int]:
        """Steps of the run whose rows are marked pruned yet still hold a checkpoint —
        only tampering makes one, and it hides that checkpoint from ``history``
        and loads (``safepoint verify`` reports them); ``NotFound`` if absent."""
        return self._call(calls.hidden_steps, run_id)

    def queue_depth(self) -> int:
        """How many queued runs a claim could take now (free or expired lease,
        ``retry_at`` come): the backlog a fleet of workers faces."""
        return self._call(calls.queue_depth)

    def queue_state(self, run_id: str) -> leases.QueueState:
        """Where the run stands with the workers: queued or not, the lease's holder,
        epoch and expiry (``leases.QueueState``); ``NotFound`` if absent."""
        return self._call(calls.queue_state, run_id)

    def revoke_lease(self, run_id: str) -> leases.QueueState:
        """Fence off the worker holding the run's lease and take the run out of the queue.

        The holder's next save, heartbeat or release raises ``LeaseLost``. Out
        of the queue too, so no worker claims the run while the caller works
        on it: ``enqueue`` (or ``requeue``) hands it back. Returns the state
        as it was before (``state.leased()``: whether a live lease was
        revoked); ``NotFound`` if absent.
        """
        return self._call(calls.revoke_lease, run_id)

    def claim(self, worker_id: str, *, lease: float | timedelta = 30.0) -> Lease | None:
        """Atomically take one queued run whose lease is free or expired.

        Returns a ``Lease`` whose ``epoch`` is higher than any earlier claim of
        the run, or None when nothing is claimable. Save under it with
        ``save(cp, lease=...)``; keep it alive with ``heartbeat``. ``lease`` is
        a positive duration of at most 365 days (seconds or a ``timedelta``).
        """
        return self._call(calls.claim, worker_id, lease)

    def heartbeat(self, lease: Lease, *, extend: float | timedelta | None = None) -> Lease:
        """Extend the lease (by its own duration unless ``extend``); ``LeaseLost`` if fenced off."""
        return self._call(calls.heartbeat, lease, extend)

    def release(self, lease: Lease, *, status: Status | str | None = None, requeue: bool = False) -> None:
        """Give the run back. ``requeue`` keeps it queued for another worker;
        ``status`` sets the run's status (its checkpoints keep theirs).
        ``LeaseLost`` if the lease is no longer current."""
        self._call(calls.release, lease, status, requeue)

    def close(self) -> None:
        """Release the connection(s). Using the store afterwards raises ``StoreClosed``."""
        self._driver.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<safepoint.Store {self.url}>"
