"""What a redaction writes for one run, in stored form: ``RunRedaction``. Pure: no I/O.

The operation (``ops/redacting.redact_run``) reads a run's rows, journal and
run row as stored and hands them here; this module opens them (an encrypted
store's ``Sealer``), redacts each value where it is (``ValueRedactor``) and
gives back the columns to write, sealed again for their places.

Every row keeps its place in the run's message log: seqs, ranges and
carriers stay as they are. What follows from a changed body is recomputed
the way a save computes it: the chain value of every seq, along the views
that see them (a view is a prefix of an earlier view plus new seqs, so a
seq has one chain value in every view that sees it), each row's ``chains``,
each header's chain value and digest, each row's ``blobs``, and the run
row's head digest (PostgreSQL keeps it there). A journal entry is redacted
as ``call_values.stored_result`` writes one: its value under
``state.result``, its digest over its new body.

A value in the run id, in a label key, or in a label an adapter finds its
runs by cannot be rewritten without losing the run: it is counted in
``RunRedacted.left`` and left as it is.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from safepoint import codec
from safepoint.model import VALUE_FIELDS, ScrubReport

from .call_values import entry_digest
from .large_values import BLOB_MARK, digests_json, find_stored_refs, stored_digests
from .redaction import ValueRedactor
from .sealer import Sealer
from .stored import parse_ranges

# Labels an adapter finds its runs by (a thread, session or conversation id) live under these
# prefixes: a value in one is reported, never rewritten (the adapter would lose the run).
RESOLVING_LABELS = (
    "safepoint.",
    "langgraph.",
    "openai_agents.",
    "pydantic_ai.",
    "google_adk.",
    "agent_framework.",
)


@dataclass(slots=True)
class RunRedacted:
    """What redacting one run found and changed (counts only, never a value)."""

    run_id: str
    counts: Counter[str] = field(default_factory=Counter)  # findings by rule (secret:NAME, a rule)
    steps: dict[int, int] = field(default_factory=dict)  # findings by checkpoint step
    rows: int = 0  # checkpoint rows rewritten (chain values included)
    calls: int = 0  # journal entries rewritten
    blobs_new: int = 0  # blobs written in place of ones that held a finding
    left: Counter[str] = field(default_factory=Counter)  # where a finding was left: run id, label key, ...
    dropped: set[str] = field(default_factory=set)  # blobs its rewritten rows referenced and no longer do
    record: dict[str, Any] | None = None  # the audit record written (None: nothing changed, or a dry run)

    @property
    def found(self) -> int:
        return sum(self.counts.values())


@dataclass(slots=True)
class _Row:
    """One checkpoint row, opened: its header and bodies as plain bytes, and where they sit."""

    step: int
    header: bytes
    bodies: list[bytes]
    chains_stored: Any  # as stored (sealed on an encrypted store): opened only if chains change
    first_seq: int
    ranges_text: Any  # parsed only when a body changes (``ranges``)
    pruned: bool
    blobs: str | None
    changed_bodies: bool = False
    changed_header: bool = False
    _ranges: tuple[tuple[int, int], ...] | None = None

    @property
    def ranges(self) -> tuple[tuple[int, int], ...]:
        """The seqs its checkpoint sees (none for a pruned row, whose view is gone)."""
        if self._ranges is None:
            self._ranges = parse_ranges(self.ranges_text) if not self.pruned else ()
        return self._ranges


class RunRedaction:
    """One run's redaction: its rows, journal entries and run row in, the columns to write out."""

    def __init__(self, run_ref: int, run_id: str, redactor: ValueRedactor, sealer: Sealer | None) -> None:
        self.run_ref = run_ref
        self.run_id = run_id
        self.redactor = redactor
        self.sealer = sealer
        self.done = RunRedacted(run_id)
        if redactor.redaction.finds_in_text(run_id):
            self.done.left["run id"] += 1
        self.rows: list[_Row] = []
        self.head_digest: bytes | None = None  # the head row's new stored digest, once rewritten
        # What to write, once worked out (ops/redacting.py sets them from the methods below).
        self.row_writes: list[dict[str, Any]] = []
        self.call_writes: list[dict[str, Any]] = []
        self.run_write: dict[str, Any] | None = None

    # -- checkpoint rows -------------------------------------------------------

    def rows_to_write(self, stored_rows: list[Any]) -> list[dict[str, Any]]:
        """Each row redacted (bodies, then header), chains recomputed: the rows that changed."""
        redactor, done = self.redactor, self.done
        self.rows = [self._opened(row) for row in stored_rows]
        for row in self.rows:
            before = redactor.total
            self._redact_row(row)
            if redactor.total > before:
                done.steps[row.step] = redactor.total - before
        if any(row.changed_bodies for row in self.rows):
            body_of = {
                row.first_seq + index: body for row in self.rows for index, body in enumerate(row.bodies)
            }
            chains: dict[int, bytes] | None = _chains(self.rows, body_of)
        else:
            chains = None
        writes = []
        for row in self.rows:
            params = self._row_params(row, chains)
            if params is not None:
                writes.append(params)
                done.dropped |= _digests([row.blobs]) - _digests([params["blobs"]])
                if row is self.rows[-1]:
                    self.head_digest = params["digest"]
        done.rows = len(writes)
        return writes

    def _opened(self, row: Any) -> _Row:
        messages = self._plain(row.messages, row.step, "messages")
        return _Row(
            step=row.step,
            header=self._plain(row.header, row.step, "header") or b"",
            bodies=messages.split(b"\n") if messages and row.added else [],
            chains_stored=row.chains,
            first_seq=row.first_seq,
            ranges_text=row.ranges,
            pruned=bool(row.pruned),
            blobs=row.blobs,
        )

    def _plain(self, value: Any, step: int, column: str) -> bytes | None:
        if value is None:
            return None
        data = bytes(value)
        if self.sealer is None or not data:
            return data
        return bytes(self.sealer.open(data, self.run_id, step, column))

    def _sealed(self, value: bytes | None, step: int, column: str) -> bytes | None:
        if value is None or self.sealer is None or not value:
            return value
        return self.sealer.seal(value, self.run_id, step, column)

    def _redact_row(self, row: _Row) -> None:
        redactor = self.redactor
        total, before = redactor.total, Counter(redactor.places) if redactor.places else None
        self._redact_values(row)
        if redactor.total == total:
            return  # the usual row: nothing found
        found = redactor.places - before if before is not None else Counter(redactor.places)
        if found and row.header and not row.pruned:
            # The row's scrub report gains what was found in its values and the messages it
            # added, by rule and path, as a save that knew the value would have reported them.
            header = codec.decode(row.header)
            kept = Counter({(rule, path): count for rule, path, count in header.get("scrub") or ()})
            header["scrub"] = ScrubReport.merge([kept, found]).to_json()
            row.header, row.changed_header = codec.encode(header), True

    def _redact_values(self, row: _Row) -> None:
        redactor = self.redactor
        first_index = -1  # the view index of the row's first body, worked out if a body is walked
        for index, body in enumerate(row.bodies):
            if not redactor.might_hold(body):
                continue
            if first_index < 0:
                # Named as a save names them: their index in the view of the row that added them.
                count = sum(end - start for start, end in row.ranges)
                first_index = count - len(row.bodies) if not row.pruned else row.first_seq
            new = redactor.body(body, f"messages[{first_index + index}]")
            if new is not None:
                row.bodies[index] = new
                row.changed_bodies = True
        if row.pruned or not row.header:
            return  # a pruned row keeps only the bodies later views see
        redactor.scanned += len(row.header)
        if not redactor.header_might_hold(row.header):
            return
        header = codec.decode(row.header)
        changed = False
        for name in VALUE_FIELDS:
            value = header.get(name)
            new_value = None if value is None else redactor.value(value, name, look=True)
            if new_value is not None:
                header[name], changed = new_value, True
        labels = self._labels(header.get("labels") or {})
        if labels is not None:
            header["labels"], changed = labels, True
        counters = redactor.strings(header.get("counters") or {}, "counters", values_too=False)
        if counters is not None:
            header["counters"], changed = counters, True
        if changed:
            row.header, row.changed_header = codec.encode(header), True

    def _labels(self, labels: dict[str, str]) -> dict[str, str] | None:
        """Label values redacted as a save scrubs them (markers); keys, and the labels
        adapters resolve runs by, are left and counted."""
        redaction, out, changed = self.redactor.redaction, dict(labels), False
        for key, value in labels.items():
            key_holds = redaction.finds_in_text(key)
            if key_holds:
                self.done.left["label key"] += 1
            if key.startswith(RESOLVING_LABELS):
                if redaction.finds_in_text(value):
                    self.done.left["adapter label"] += 1
                continue
            # Scrubbed under its key, as a save does (the report's path names it), unless
            # the key holds a finding itself: a key is left, so it is not handed over.
            new = self.redactor.strings({"": value} if key_holds else {key: value}, "labels", values_too=True)
            if new is not None:
                out[key], changed = next(iter(new.values())), True
        return out if changed else None

    def _row_params(self, row: _Row, chains: dict[int, bytes] | None) -> dict[str, Any] | None:
        """The row's new columns, sealed for its place; None when nothing in it changed."""
        new_chains: Any = row.chains_stored  # written back as stored unless they change
        chains_changed = False
        if chains is not None and row.chains_stored is not None and row.bodies:
            joined = b"".join(chains[row.first_seq + index] for index in range(len(row.bodies)))
            if joined != self._plain(row.chains_stored, row.step, "chains"):
                new_chains, chains_changed = self._sealed(joined, row.step, "chains"), True
        header = row.header
        if chains is not None and not row.pruned and header:
            fields = codec.decode(header)
            last = chains.get(row.ranges[-1][1] - 1) if row.ranges else None
            chain = (last if last is not None else codec.EMPTY_CHAIN).hex()
            if fields["messages"]["chain"] != chain:
                fields["messages"]["chain"] = chain
                header = codec.encode(fields)
        if header == row.header and not chains_changed and not row.changed_bodies and not row.changed_header:
            return None
        plain_digest = codec.digest(header) if header else b""
        return {
            "run_ref": self.run_ref,
            "step": row.step,
            "header": self._sealed(header, row.step, "header"),
            "digest": self.sealer.keyed(plain_digest) if self.sealer is not None and header else plain_digest,
            "messages": self._sealed(b"\n".join(row.bodies) if row.bodies else None, row.step, "messages"),
            "chains": new_chains,
            "blobs": digests_json(stored_digests((header, *row.bodies))),
        }

    # -- the call journal ------------------------------------------------------

    def calls_to_write(self, stored_calls: list[Any]) -> list[dict[str, Any]]:
        writes = [params for call in stored_calls if (params := self._call(call)) is not None]
        self.done.calls = len(writes)
        return writes

    def _call(self, call: Any) -> dict[str, Any] | None:
        """A journal entry redacted as ``stored_result`` writes one; None when nothing was found."""
        if call.result is None:
            return None
        place = "call:" + call.key
        body = self._plain(call.result, call.step, place)
        assert body is not None
        self.redactor.scanned += len(body)
        if not self.redactor.redaction.might_match(body) and BLOB_MARK not in body:
            return None
        before = Counter(self.redactor.counts)
        data = codec.decode(body)
        state = self.redactor.value({"result": data["value"]}, "state")
        if state is None:
            return None
        found = self.redactor.counts - before
        self.done.steps[call.step] = self.done.steps.get(call.step, 0) + sum(found.values())
        # A marker replaces the value for good (the entry replays redacted) and counts; a
        # registered secret's reference is resolved again and does not (stored_result's rule).
        data["redacted"] = int(data.get("redacted", 0)) + sum(
            count for rule, count in found.items() if self.redactor.redaction.is_for_good(rule)
        )
        data["value"] = state["result"]
        new_body = codec.encode(data)
        digest = entry_digest(call.key, new_body)
        blobs = digests_json(find_stored_refs(data["value"], []))
        self.done.dropped |= _digests([call.blobs]) - _digests([blobs])
        return {
            "run_ref": self.run_ref,
            "key": call.key,
            "result": self._sealed(new_body, call.step, place),
            "digest": digest if self.sealer is None else self.sealer.keyed(digest),
            "blobs": blobs,
        }

    # -- the run row -----------------------------------------------------------

    def run_to_write(self, run: Any) -> dict[str, Any] | None:
        """The run row's content columns after the redaction; None when none changed."""
        sealer, run_id = self.sealer, self.run_id
        labels_text = run.labels if sealer is None else sealer.open_labels(run.labels, run_id)
        counters = run.counters
        if counters is not None and sealer is not None:
            counters = sealer.open_json(counters, run_id, "counters")
        error = run.last_error
        if error is not None and sealer is not None:
            error = sealer.open_text(error, run_id, "last_error")
        rows = self.rows
        head = codec.decode(rows[-1].header) if rows and rows[-1].header and not rows[-1].pruned else None
        changed = self.head_digest is not None
        labels = codec.decode(labels_text)
        if head is not None and head.get("labels") != labels:
            labels, changed = head["labels"], True  # the run row keeps the head's labels
        if (
            counters is not None
            and head is not None
            and list(codec.decode(counters)) != list(head["counters"])
        ):
            counters, changed = codec.encode(head["counters"]).decode(), True
        if error is not None:
            scrubbed = self.redactor.strings({"": error}, "last_error", values_too=True)
            if scrubbed is not None:
                error, changed = scrubbed[""], True
        if not changed:
            return None
        labels_out = codec.encode(labels).decode()
        return {
            "run_ref": self.run_ref,
            "labels": labels_out if sealer is None else sealer.seal_labels(labels_out, run_id),
            "counters": counters
            if counters is None or sealer is None
            else sealer.seal_json(counters, run_id, "counters"),
            "error": error
            if error is None or sealer is None
            else sealer.seal_text(error, run_id, "last_error"),
            "head_digest": self.head_digest if self.head_digest is not None else run.head_digest,
        }


def _chains(rows: list[_Row], body_of: dict[int, bytes]) -> dict[int, bytes]:
    """Every seq's chain value, walked along the views that see them (each seq hashed once)."""
    chain: dict[int, bytes] = {}
    for row in rows:
        prev = codec.EMPTY_CHAIN
        for start, end in row.ranges:
            for seq in range(start, end):
                value = chain.get(seq)
                if value is None:
                    value = chain[seq] = codec.extend_chain(prev, [body_of[seq]])[0]
                prev = value
    # Bodies no live view sees (a pruned row's, never carried on): chained after the seq before.
    for seq in sorted(set(body_of) - set(chain)):
        chain[seq] = codec.extend_chain(chain.get(seq - 1, codec.EMPTY_CHAIN), [body_of[seq]])[0]
    return chain


def _digests(columns: list[Any]) -> set[str]:
    """The digests in ``blobs`` columns (JSON lists, or None)."""
    out: set[str] = set()
    for column in columns:
        if column:
            out.update(codec.decode(column))
    return out
