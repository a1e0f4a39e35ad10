"""The call table, runs and checkpoints: save, load, fork, list, delete (see ``methods``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from functools import partial
from typing import Any

from safepoint import records
from safepoint.errors import Conflict, InvalidArgument
from safepoint.model import Checkpoint, ParentRef, Status
from safepoint.observe import store_calls
from safepoint.records import CheckpointInfo, CounterSums, Lease, Page, RunInfo, TimelinePoint
from safepoint.store import arguments, calls
from safepoint.store.after_load import ResolveSecrets
from safepoint.store.calls import Call, SaveFacts, reads, writes
from safepoint.store.delta import MessagePlan, finish_save
from safepoint.store.ops import counting, listing, saving
from safepoint.store.ops import runs as run_ops
from safepoint.store.prepare import guarded, prepare_save
from safepoint.store.query import Op
from safepoint.store.settings import StoreSettings
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
        return save_call(checkpoint, lease, self.settings)

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
        updated_until: datetime | None = None,
        sort: str = "created",
        descending: bool = True,
    ) -> Returns[Page[RunInfo]]:
        """Runs, newest first, filtered by status (one or several), labels (all
        must match), last update (``updated_since`` and ``updated_until``, both
        included) and the start of the run id (``run_id_prefix``,
        matched exactly: no wildcards); pass ``page.next_cursor`` back as
        ``cursor`` for the next page. ``sort`` orders the whole listing, not a
        page: ``created`` (the default), ``updated``, ``run_id``, ``status`` or
        ``step``, ties broken by creation, ``descending`` or not; a cursor is
        for the same sort and direction. ``limit`` is 1 to 10,000; a bad status,
        limit, prefix, sort or cursor raises ``InvalidArgument``."""
        return calls.runs(
            status=status,
            labels=labels,
            updated_since=updated_since,
            limit=limit,
            cursor=cursor,
            prefix=run_id_prefix,
            updated_until=updated_until,
            sort=sort,
            descending=descending,
        )

    @method("safepoint.counter_sums")
    def counter_sums(
        self,
        *,
        status: Status | str | Iterable[Status | str] | None = None,
        labels: dict[str, str] | None = None,
        updated_since: datetime | None = None,
        updated_until: datetime | None = None,
        hidden: Iterable[dict[str, str]] | None = None,
    ) -> Returns[CounterSums]:
        """The head counters of the runs ``runs`` would list with these filters, summed per UTC
        hour of their last update (int and float counters; each run counted once), in one query
        that loads no checkpoint. ``hidden``: label sets — a run holding every label of one is
        left out. On an encrypted store each run's counters are opened with the keyring."""
        rules: list[dict[str, str]] | None = None
        if hidden is not None:
            given = list(hidden)
            rules = [rule for rule in map(arguments.label_filter, given) if rule]
            if len(rules) != len(given):  # an empty set is held by every run: all hidden
                raise InvalidArgument("each of hidden must be a dict of at least one label")
        return reads(
            counting.counter_sums(
                statuses=None if status is None else arguments.statuses(status),
                labels=arguments.label_filter(labels),
                hidden=rules,
                updated_since=arguments.since(updated_since),
                updated_until=arguments.since(updated_until, "updated_until"),
            )
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


# The save's call, beside its entry: the hot path of every agent step, in one room.
SaveOp = Callable[..., Op[saving.SaveResult[MessagePlan]]]
_PREPARE_VALIDATED = partial(prepare_save, validate=True)  # made once, not on every save


def _forgetting_on_conflict(
    make: Callable[[], Op[saving.SaveResult[MessagePlan]]], settings: StoreSettings, run_id: str
) -> Op[saving.SaveResult[MessagePlan]]:
    """The save, letting go of the store's memory of the run when it conflicts: a memory of a
    head a redaction rewrote (same step, other digest) would refuse every later fresh save."""
    try:
        return (yield from make())
    except Conflict:
        settings.memory.forget(run_id)
        raise


def save_call(
    cp: Checkpoint, lease: Lease | None, settings: StoreSettings, save_op: SaveOp | None = None
) -> Call[saving.SaveResult[MessagePlan], CheckpointInfo]:
    """The call a ``save`` makes: its checkpoint validated, scrubbed and planned before the
    transaction, the transaction itself (``ops.saving.save``, or ``save_op``), and what the
    committed save tells the checkpoint, the store's memory of the run and its span."""
    if not isinstance(cp, Checkpoint):
        raise InvalidArgument(f"save takes a safepoint.Checkpoint, not {type(cp).__name__}")
    if lease is not None:
        arguments.check_lease(lease)
    scrubber = settings.scrubber
    # Validated, then scrubbed and encoded: a bad value is refused before anything else.
    prepared = guarded(
        scrubber,
        _PREPARE_VALIDATED,
        cp,
        scrubber,
        settings.blobs,
        settings.blob_policy,
        settings.schema_version,
    )
    if lease is not None and lease.run_id != cp.run_id:
        raise InvalidArgument(f"the lease is for run {lease.run_id!r}, not {cp.run_id!r}")
    view = cp.stored_view
    if view is not None and view.run_id != cp.run_id:
        view = None
    # A fresh checkpoint has no view: the store's memory gives one (remembered.py).
    recall = settings.memory.recall(cp.run_id, cp.step, view, cp.messages)
    view = recall.view
    # Nothing to plan against: ops.save plans once, in the transaction, against the head.
    plan = None if view is None and cp.step > 0 else prepared.plan(view, cp.messages, recall.known)
    now = records.now_micros()  # looked up on records: one clock for every save (tests set it)

    def finish(result: saving.SaveResult[MessagePlan]) -> CheckpointInfo:
        plan, ranges, carriers = result.plan, result.ranges, result.carriers
        finish_save(cp, plan, ranges=ranges, carriers=carriers, created_at=now, digest=result.digest)
        settings.memory.remember(cp.run_id, recall, plan, cp.messages)
        cp.__dict__["scrub_report"] = result.report  # a store field: no Checkpoint.__setattr__ frame
        assert cp.created_at is not None
        assert cp.digest is not None
        return records.checkpoint_info(
            cp.run_id,
            cp.step,
            cp.schema_version,
            cp.status,
            cp.created_at,
            result.plan.total,
            cp.digest,
            result.report,
        )

    def written(result: saving.SaveResult[MessagePlan]) -> SaveFacts:
        # Read after commit: a re-plan inside the transaction may have added blobs.
        blobs = prepared.pending_blobs()
        bodies = result.plan.bodies
        return SaveFacts(
            bytes_written=sum(map(len, bodies)) + sum(map(len, blobs.values())),
            messages_added=len(bodies),
            blobs_written=len(blobs),
            findings=result.report.by_rule(),
        )

    build = partial(save_op or saving.save, cp, prepared, view, plan, now=now, lease=lease)
    if view is not None and view is not cp.stored_view:  # planned against the store's memory
        build = partial(_forgetting_on_conflict, build, settings, cp.run_id)
    # External blobs are uploaded before the transaction (no upload under the run's row lock or
    # the idle-in-transaction timeout); the op re-checks them under the blob guard (blob_targets.py).
    before = None
    if settings.blobs is not None and not settings.blobs.in_database:
        pending = prepared.pending_blobs()
        if pending:
            before = partial(settings.blobs.put_all, pending)
    weight = 0 if plan is None else sum(map(len, plan.bodies))  # bounds a group commit's batch
    return Call(build(), True, finish, before, written, rebuild=build, weight=weight)
