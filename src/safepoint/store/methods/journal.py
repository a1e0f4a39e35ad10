"""The call table, the call journal: record a call's result or intent, read entries (see ``methods``)."""

from __future__ import annotations

from functools import partial
from typing import Any

from safepoint.errors import InvalidArgument
from safepoint.observe import store_calls
from safepoint.records import CallUsage, Lease, Recorded, from_micros, now_micros
from safepoint.store import arguments, call_checks
from safepoint.store.after_load import ResolveSecrets
from safepoint.store.call_values import (
    StoredResult,
    check_key,
    loaded_result,
    request_digest,
    stored_result,
    written_result,
)
from safepoint.store.calls import Call
from safepoint.store.ops import journal
from safepoint.store.query import Row
from safepoint.store.settings import StoreSettings
from safepoint.store.twins import Entries, Returns, method
from safepoint.store.validate import check_id, check_step


class JournalMethods(Entries):
    """A run's call journal (docs/journal.md): one entry per store method."""

    @method("safepoint.record_call", ("run_id",), store_calls.of_run)
    def record_call(
        self,
        run_id: str,
        key: str,
        result: Any,
        *,
        request: Any = None,
        usage: CallUsage | None = None,
        lease: Lease | None = None,
    ) -> Returns[Recorded]:
        """Record what a call of the run returned, under ``key`` (its place in the run), durably,
        before the caller goes on: put if absent, so the first result stored wins.

        Returns the entry as stored: ``written`` when this result is the one
        kept; else the entry another writer stored first (its ``result``,
        which the caller should use instead). ``result`` is JSON data (bytes
        and large values go to blobs), scrubbed like a checkpoint value;
        ``request`` — what the call asked, any JSON — is kept only as a digest,
        which ``recorded_call`` compares; ``usage`` is what the call cost
        (counted once per entry). The entry belongs to the step after the
        run's head: the checkpoint that will cover it. Fenced like ``save``:
        under ``lease`` only while it is the run's current one (``LeaseLost``);
        without one, ``RunHeld`` while another writer's lease lives.
        ``NotFound`` if the run does not exist.
        """
        return _write(self.settings, run_id, key, result, request, usage, lease, intent=False)

    @method("safepoint.call_intent", ("run_id",), store_calls.of_run)
    def call_intent(
        self, run_id: str, key: str, *, request: Any = None, lease: Lease | None = None
    ) -> Returns[Recorded]:
        """Record that a call with an effect is about to be made, under ``key``: put if absent.

        Written before a non-idempotent effect (and before a paid model
        request), so a resume tells "never started" (no entry), "in flight"
        (an intent: ask the reconcile hook) and "done" (a result). The intent
        names the lease it was written under. Returns the entry as stored
        (``written`` when this intent is new). Fenced like ``record_call``.
        """
        return _write(self.settings, run_id, key, None, request, None, lease, intent=True)

    @method("safepoint.recorded_call", ("run_id",), store_calls.of_run)
    def recorded_call(
        self, run_id: str, key: str, *, request: Any = None, resolve_secrets: ResolveSecrets = False
    ) -> Returns[Recorded | None]:
        """The entry under ``key``, or None. With ``request``, ``same_request`` says whether the
        entry was recorded for the same request (a changed request must not be replayed).
        ``resolve_secrets`` as ``load``'s. One key lookup, whatever the run's length."""
        settings, name = self.settings, check_id(run_id)
        checked, digest, now = check_key(key), request_digest(request), now_micros()
        arguments.resolver(resolve_secrets)
        op = journal.read(name, checked, digest, now, settings.blobs)

        def finish(entry: journal.Entry | None) -> Recorded | None:
            return None if entry is None else _recorded(name, entry, settings, resolve_secrets)

        return Call(op, False, finish)

    @method("safepoint.recorded_calls", ("run_id", "step"), store_calls.of_run)
    def recorded_calls(
        self, run_id: str, *, step: int | None = None, resolve_secrets: ResolveSecrets = False
    ) -> Returns[list[Recorded]]:
        """The run's entries, or those of ``step`` (covered by that step's checkpoint), in the
        order they were written. ``NotFound`` if the run does not exist."""
        settings, name = self.settings, check_id(run_id)
        arguments.resolver(resolve_secrets)
        op = journal.entries(name, check_step(step), settings.blobs)

        def finish(found: tuple[list[Row], dict[str, bytes]]) -> list[Recorded]:
            rows, fetched = found
            entries = [journal.Entry(row, False, fetched) for row in rows]
            return [_recorded(name, entry, settings, resolve_secrets) for entry in entries]

        return Call(op, False, finish)


def _write(  # noqa: PLR0917 - the entries' arguments, passed on as they came
    settings: StoreSettings,
    run_id: str,
    key: str,
    result: Any,
    request: Any,
    usage: CallUsage | None,
    lease: Lease | None,
    *,
    intent: bool,
) -> Call[journal.Entry | journal.Stored, Recorded]:
    name, checked = check_id(run_id), check_key(key)
    if lease is not None:
        arguments.check_lease(lease)
        if lease.run_id != name:
            raise InvalidArgument(f"the lease is for run {lease.run_id!r}, not {name!r}")
    digest = request_digest(request)
    stored = None if intent else stored_result(checked, result, usage, settings)
    op = journal.write(name, checked, digest, stored, lease, now_micros(), settings.blobs)
    before = None
    blobs = settings.blobs
    if stored is not None and stored.pending and blobs is not None and not blobs.in_database:
        # Uploaded before the transaction, as a save's are; the op re-checks them under the guard.
        before = partial(blobs.put_all, stored.pending)

    def finish(entry: journal.Entry | journal.Stored) -> Recorded:
        if isinstance(entry, journal.Stored):  # this write's own entry: nothing to read or check
            return _written(name, checked, entry, stored)
        return _recorded(name, entry, settings, False)

    return Call(op, True, finish, before)


def _written(run_id: str, key: str, entry: journal.Stored, stored: StoredResult | None) -> Recorded:
    """The entry a write stored, as ``recorded_call`` would give it back: its result in stored
    form (secret references typed, as a read without ``resolve_secrets`` gives them)."""
    value, usage, redacted = None, None, 0
    if stored is not None:
        (value, usage), redacted = written_result(stored), stored.redacted
    return Recorded(
        run_id=run_id,
        key=key,
        step=entry.step,
        state="intent" if stored is None else "done",
        result=value,
        usage=usage,
        same_request=entry.same_request,
        writer=entry.writer,
        epoch=entry.epoch,
        writer_live=entry.writer_live,
        created_at=from_micros(entry.created_at),
        done_at=None if entry.done_at is None else from_micros(entry.done_at),
        written=True,
        redacted=redacted,
    )


def _recorded(
    run_id: str, entry: journal.Entry, settings: StoreSettings, resolve: ResolveSecrets
) -> Recorded:
    row = entry.row
    call_checks.check(run_id, row)  # verified like a checkpoint: never replay an altered result
    value, usage, redacted = None, None, 0
    if row.result is not None:
        value, usage, redacted = loaded_result(bytes(row.result), settings, entry.fetched, resolve)
    columns = row.columns
    return Recorded(
        run_id=run_id,
        key=row.key,
        step=row.step,
        state=row.state,
        result=value,
        usage=usage,
        same_request=None
        if "same_request" not in columns or row.same_request is None
        else bool(row.same_request),
        writer=row.writer,
        epoch=row.epoch,
        writer_live=bool(row.writer_live) if "writer_live" in columns else False,
        created_at=None if row.created_at is None else from_micros(row.created_at),
        done_at=None if row.done_at is None else from_micros(row.done_at),
        written=entry.written,
        redacted=redacted,
    )
