"""The call table, runs and checkpoints: save, load, fork, list, delete (see ``methods``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from safepoint.model import Checkpoint, ParentRef, Status
from safepoint.observe import store_calls
from safepoint.records import CheckpointInfo, Lease, Page, RunInfo, TimelinePoint
from safepoint.store import calls
from safepoint.store.after_load import ResolveSecrets
from safepoint.store.calls import reads, writes
from safepoint.store.ops import listing
from safepoint.store.ops import runs as run_ops
from safepoint.store.twins import Entries, Returns, method
from safepoint.store.validate import check_id


class CheckpointMethods(Entries):
    """Runs and their checkpoints: one entry per store method."""

    @method("safepoint.save", ("checkpoint", "lease"), store_calls.of_save)
    def save(self, checkpoint: Checkpoint, *, lease: Lease | None = None) -> Returns[CheckpointInfo]:
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
        return calls.save(checkpoint, lease, self.settings)

    @method("safepoint.load", ("run_id", "step"), store_calls.of_run, done=store_calls.loaded)
    def load(
        self,
        run_id: str,
        step: int | None = None,
        *,
        resolve_secrets: ResolveSecrets = False,
        migrate: bool = True,
        fetch_blobs: bool = True,
    ) -> Returns[Checkpoint]:
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
        return calls.load(
            run_id,
            step,
            self.settings,
            resolve_secrets=resolve_secrets,
            migrate=migrate,
            fetch_blobs=fetch_blobs,
        )

    @method("safepoint.fetch_blob")
    def fetch_blob(self, ref: Any) -> Returns[str | bytes]:
        """The value a blob reference stands for (from ``load(..., fetch_blobs=False)``).

        ``ref`` is the ``{"$blob": {…}}`` dict found in the checkpoint, or a
        ``BlobRef``. Text comes back as ``str``; the bytes are verified against
        the digest (``BlobCorrupt`` if altered, ``BlobNotFound`` if missing).
        """
        return calls.fetch_blob(ref, self.settings)

    @method(
        "safepoint.history",
        ("run_id",),
        store_calls.of_run,
        done=store_calls.counted("safepoint.checkpoints"),
    )
    def history(self, run_id: str) -> Returns[list[CheckpointInfo]]:
        """Every checkpoint of the run, oldest first (headers only, no messages)."""
        return calls.history(run_id)

    @method("safepoint.forks", ("run_id",), store_calls.of_run)
    def forks(self, run_id: str) -> Returns[list[ParentRef]]:
        """The runs forked from this one (up to 100, oldest first): each fork's id and its fork step."""
        return reads(listing.forks_of(check_id(run_id)))

    @method("safepoint.timeline", ("run_id",), store_calls.of_run)
    def timeline(self, run_id: str) -> Returns[list[TimelinePoint]]:
        """Every checkpoint's counters and stored bytes, oldest first (for charts; no messages)."""
        return reads(listing.timeline(check_id(run_id)))

    @method("safepoint.run", ("run_id",), store_calls.of_run)
    def run(self, run_id: str) -> Returns[RunInfo]:
        """The run's summary: status, head step, labels, counters, timestamps."""
        return reads(listing.run_info(check_id(run_id)))

    @method("safepoint.runs", done=store_calls.listed)
    def runs(
        self,
        *,
        status: Status | str | Iterable[Status | str] | None = None,
        labels: dict[str, str] | None = None,
        updated_since: datetime | None = None,
        limit: int = 100,
        cursor: str | None = None,
        run_id_prefix: str | None = None,
    ) -> Returns[Page[RunInfo]]:
        """Runs, newest first, filtered by status (one or several), labels (all
        must match), last update and the start of the run id (``run_id_prefix``,
        matched exactly: no wildcards); pass ``page.next_cursor`` back as
        ``cursor`` for the next page. ``limit`` is 1 to 10,000; a bad status,
        limit, prefix or cursor raises ``InvalidArgument``."""
        return calls.runs(
            status=status,
            labels=labels,
            updated_since=updated_since,
            limit=limit,
            cursor=cursor,
            prefix=run_id_prefix,
        )

    @method("safepoint.fork", ("run_id", "step"), store_calls.of_run, done=store_calls.forked)
    def fork(
        self,
        run_id: str,
        step: int | None = None,
        *,
        new_run_id: str | None = None,
        labels: dict[str, str] | None = None,
    ) -> Returns[Checkpoint]:
        """Start a new run from ``run_id``'s checkpoint at ``step`` (default: latest).

        The new run's history starts with a copy of that checkpoint, at the
        same step number, with ``parent`` recording where it came from; save
        ``fork.next()`` to continue it. Returns the new run's checkpoint.
        """
        return calls.fork(run_id, step, new_run_id, labels, self.settings)

    @method("safepoint.delete", ("run_id",), store_calls.of_run)
    def delete_run(self, run_id: str) -> Returns[None]:
        """Delete the run: every checkpoint, its messages, the run row with its queue
        entry and lease, in one transaction; ``NotFound`` if absent.

        A worker holding the lease is fenced off (its next save, heartbeat or
        release raises ``LeaseLost``). Blobs only this run referenced stay
        until ``collect_garbage`` (``safepoint gc``). The id may be used again.
        """
        return writes(run_ops.delete_run(check_id(run_id)))
