"""The call table, the call journal as stored: verify it, export it, import it (see ``methods``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import partial
from typing import Any

from safepoint.errors import CorruptCall, CorruptCheckpoint, InvalidArgument, SafepointError
from safepoint.observe import store_calls
from safepoint.records import CallCopy, CallsVerified, Recorded, from_micros, now_micros, to_micros
from safepoint.store import call_checks
from safepoint.store.call_values import check_key, loaded_result, stored_result
from safepoint.store.calls import Call
from safepoint.store.ops import journal_stored
from safepoint.store.ops.journal_stored import StoredJournal
from safepoint.store.query import Row
from safepoint.store.settings import StoreSettings
from safepoint.store.twins import Entries, Returns, method
from safepoint.store.validate import check_id, check_step

_DIGEST_BYTES = 32


class StoredJournalMethods(Entries):
    """The call journal as stored (docs/journal.md): one entry per store method."""

    @method("safepoint.verify_calls", ("run_id",), store_calls.of_run)
    def verify_calls(self, run_id: str) -> Returns[CallsVerified]:
        """Check every entry of the run's call journal, as ``safepoint verify`` does.

        Each result must match its digest (SHA-256 of key and stored result:
        an altered result, or an entry moved to another key, fails it), open
        for its run, step and key on an encrypted store, be in the stored
        form, load (its blobs present and whole), and belong to a step no
        later than the run's next. Each checkpoint must cover as many entries
        as it counted when it was saved (one deleted, or moved to another
        step, is seen there). Returns how many entries were checked, a
        ``CorruptCall`` for each damaged entry (run, step and key, never the
        result) and a ``CorruptCheckpoint`` for each step whose count is off.
        Reads only; ``NotFound`` if the run does not exist.
        """
        settings, name = self.settings, check_id(run_id)

        def finish(found: StoredJournal) -> CallsVerified:
            damaged: list[CorruptCheckpoint] = []
            steps = [row.step for row in found.covered]
            past = None if not steps else max(steps) + 1  # the run's next step: no entry beyond it
            for row in found.rows:
                detail = call_checks.damage(row) or _unloadable(row, settings, found.fetched)
                if detail is None and past is not None and row.step > past:
                    detail = "its step is past the run's next step"
                if detail is not None:
                    damaged.append(CorruptCall(name, row.step, row.key, detail))
            damaged += call_checks.miscounted(name, found.rows, found.covered)
            damaged.sort(key=lambda exc: exc.step or 0)
            return CallsVerified(len(found.rows), damaged)

        return Call(journal_stored.stored(name, settings.blobs, covered=True), False, finish)

    @method("safepoint.export_calls", ("run_id", "step"), store_calls.of_run)
    def export_calls(self, run_id: str, *, step: int | None = None) -> Returns[list[CallCopy]]:
        """The entries that travel with the run's checkpoint at ``step`` (``safepoint export``):
        those of every step up to ``step + 1`` — the calls that checkpoint and the ones before
        it cover, and those recorded after it, which a run resumed from it replays. All of the
        run's entries when ``step`` is None. Oldest first; results as stored (secret references
        kept), large values put back inline; request digests where the store can give them back
        (``CallCopy``). ``CorruptCall`` for a damaged entry; ``NotFound`` if the run does not exist.
        """
        settings, name, upto = self.settings, check_id(run_id), check_step(step)
        sealed = settings.sealer is not None

        def finish(found: StoredJournal) -> list[CallCopy]:
            copies = []
            for row in found.rows:
                if upto is not None and row.step > upto + 1:
                    continue
                call_checks.check(name, row)
                copies.append(_copy(name, row, settings, found.fetched, sealed))
            return copies

        return Call(journal_stored.stored(name, settings.blobs), False, finish)

    @method("safepoint.import_calls", ("run_id",), store_calls.of_run)
    def import_calls(self, run_id: str, copies: Sequence[CallCopy]) -> Returns[int]:
        """Write the entries an export carried (``CallCopy``) into the run's journal, in one
        transaction, each at its own step — at most the run's next step — and with its own
        times: put if absent (an entry already under a key stays). Returns how many were new.

        Results go the way ``record_call``'s go (scrubbed, large values to blobs, sealed for
        run, step and key on an encrypted store); a copy whose request digest the exporting
        store could not give back gets one no request matches: shown, never replayed.
        ``RunHeld`` while another writer's lease lives; ``NotFound`` if the run does not exist.
        """
        settings, name = self.settings, check_id(run_id)
        if isinstance(copies, CallCopy) or not isinstance(copies, Sequence):
            raise InvalidArgument("copies must be a sequence of safepoint.records.CallCopy")
        entries, pending = [], {}
        for copy in copies:
            entry = _imported(copy, settings)
            pending.update(entry.pop("pending"))
            entries.append(entry)
        blobs = settings.blobs
        before = None
        if pending and blobs is not None and not blobs.in_database:
            before = partial(blobs.put_all, pending)  # uploaded before the transaction, as a save's
        op = journal_stored.imported(name, entries, pending, now_micros(), blobs)
        return Call(op, True, lambda written: written, before)


def _unloadable(row: Row, settings: StoreSettings, fetched: dict[str, bytes]) -> str | None:
    if row.result is None:
        return None
    try:
        loaded_result(bytes(row.result), settings, fetched, False)
    except SafepointError as exc:  # a blob missing or altered: named by its class, no value
        return f"its result does not load ({type(exc).__name__})"
    return None


def _copy(
    run_id: str, row: Row, settings: StoreSettings, fetched: dict[str, bytes], sealed: bool
) -> CallCopy:
    value, usage, redacted = None, None, 0
    if row.result is not None:
        value, usage, redacted = loaded_result(bytes(row.result), settings, fetched, False)
    entry = Recorded(
        run_id=run_id,
        key=row.key,
        step=row.step,
        state=row.state,
        result=value,
        usage=usage,
        created_at=from_micros(row.created_at),
        done_at=None if row.done_at is None else from_micros(row.done_at),
        redacted=redacted,
    )
    if row.request is None:
        return CallCopy(entry)
    if sealed:  # keyed under the store's index key: meaningless anywhere else
        return CallCopy(entry, None, request_known=False)
    return CallCopy(entry, bytes(row.request))


def _imported(copy: Any, settings: StoreSettings) -> dict[str, Any]:
    """One copy as ``call_import``'s parameters (and the new blobs of its result, ``pending``)."""
    if not isinstance(copy, CallCopy) or not isinstance(copy.entry, Recorded):
        raise InvalidArgument("copies must be a sequence of safepoint.records.CallCopy")
    entry = copy.entry
    key, step = check_key(entry.key), check_step(entry.step)
    if step is None or entry.state not in ("intent", "done"):
        raise InvalidArgument("an imported call needs a step and a state of 'intent' or 'done'")
    request = copy.request_digest
    if not copy.request_known:  # no request hashes to this: the copy is never replayed
        request = hashlib.sha256(b"safepoint-call-request-unknown\x1f" + key.encode("utf-8")).digest()
    elif request is not None and (type(request) is not bytes or len(request) != _DIGEST_BYTES):
        raise InvalidArgument(f"an imported call's request digest must be {_DIGEST_BYTES} bytes")
    created = entry.created_at
    params: dict[str, Any] = {
        "key": key,
        "step": step,
        "state": entry.state,
        "request": request,
        "result": None,
        "digest": None,
        "blobs": None,
        "created_at": now_micros() if created is None else to_micros(created),
        "done_at": None,
        "pending": {},
    }
    if entry.state == "done":
        if type(entry.redacted) is not int or entry.redacted < 0:
            raise InvalidArgument("an imported call's redacted count must be a non-negative int")
        stored = stored_result(key, entry.result, entry.usage, settings, redacted_before=entry.redacted)
        done = entry.done_at
        params.update(
            result=stored.body,
            digest=stored.digest,
            blobs=stored.blobs,
            done_at=params["created_at"] if done is None else to_micros(done),
            pending=stored.pending,
        )
    return params
