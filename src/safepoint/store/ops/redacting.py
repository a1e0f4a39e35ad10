"""Redacting one run as stored, in one transaction: ``redact_run``.

Like ``resealing.py``, this operation sees values as stored — it is run on
the driver directly, not through ``sealed_ops`` — and opens and seals them
itself with the store's ``Sealer`` on an encrypted store. The run row is
read first and locked (PostgreSQL: ``FOR UPDATE``; SQLite's write
transaction takes the file), so the run's writers wait for it and no other.

Every row keeps its place in the run's message log: each body is redacted
where it is (``ValueRedactor.body``), so seqs, ranges and carriers stay as
they are. What follows from a changed body is recomputed the way a save
computes it: the chain value of every seq from the first changed body on,
along the views that see them (a view is a prefix of an earlier view plus
new seqs, so a seq has one chain value in every view that sees it), each
row's ``chains``, each header's chain value and digest, each row's
``blobs``; on PostgreSQL the run row's head digest. The call journal's
entries are redacted like a save writes them (``call_values.stored_result``:
the value under ``state.result``, the entry's digest over its new body).

A run with nothing to find is not written at all; a rerun after a kill
therefore leaves done runs alone and finishes the others. What a row cannot
lose — a value in the run id or in a label key, or in a label an adapter
finds its runs by — is counted in ``RunRedacted.left`` and left as it is.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from safepoint import codec
from safepoint.model import VALUE_FIELDS
from safepoint.store.blob_targets import BlobTarget
from safepoint.store.call_values import entry_digest
from safepoint.store.large_values import digests_json, find_stored_refs, stored_digests
from safepoint.store.query import Op, Query
from safepoint.store.redaction import ValueRedactor
from safepoint.store.sealer import Sealer
from safepoint.store.stored import parse_ranges

from .loading import read_blobs

# Labels an adapter finds its runs by (a thread, session or conversation id) live under these
# prefixes: a value in one is reported, never rewritten (the adapter would lose the run).
RESOLVING_LABELS = ("safepoint.", "langgraph.", "openai_agents.", "pydantic_ai.", "google_adk.", "agent_framework.")


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
    step: int
    header: bytes
    bodies: list[bytes]
    chains: bytes | None
    first_seq: int
    ranges: tuple[tuple[int, int], ...]
    pruned: bool
    changed_bodies: bool = False
    changed_header: bool = False


def redact_run(
    run_ref: int,
    run_id: str,
    redactor: ValueRedactor,
    sealer: Sealer | None,
    *,
    now: int,
    dry_run: bool,
    audit: dict[str, Any],
) -> Op[RunRedacted | None]:
    """Redact one run's rows, journal and run row; None when the run was deleted since it was listed."""
    found = yield Query("sealed_run_read" if dry_run else "sealed_run", {"run_ref": run_ref})
    if not found:
        return None
    run = found[0]
    done = RunRedacted(run_id)
    if redactor.redaction.finds_in_text(run_id):
        done.left["run id"] += 1
    stored_rows = yield Query("redaction_rows", {"run_ref": run_ref})
    stored_calls = yield Query("redaction_calls", {"run_ref": run_ref})
    digests: set[str] = set()
    for row in (*stored_rows, *stored_calls):
        if row.blobs:
            digests.update(codec.decode(row.blobs))
    target = redactor.blobs
    fetched: dict[str, bytes] = {}
    if digests and target is not None and target.in_database:
        fetched = yield from read_blobs(sorted(digests))
    redactor.start(_fetcher(target, fetched))

    rows = [_opened(row, run_id, sealer) for row in stored_rows]
    body_of: dict[int, bytes] = {}
    for row in rows:
        before = sum(redactor.counts.values())
        _redact_row(row, redactor, done)
        for index, body in enumerate(row.bodies):
            body_of[row.first_seq + index] = body
        if sum(redactor.counts.values()) > before:
            done.steps[row.step] = sum(redactor.counts.values()) - before
    new_chains = _chains(rows, body_of) if any(row.changed_bodies for row in rows) else None

    writes: list[dict[str, Any]] = []
    head_digest: bytes | None = None
    for row in rows:
        params = _row_params(row, new_chains, run_id, sealer, run_ref)
        if params is not None:
            writes.append(params)
            if row is rows[-1]:
                head_digest = params["digest"]
    call_writes = [
        params
        for call in stored_calls
        if (params := _redact_call(call, run_id, redactor, sealer, run_ref, done)) is not None
    ]
    old = [row.blobs for row in stored_rows if any(w["step"] == row.step for w in writes)]
    old += [call.blobs for call in stored_calls if any(w["key"] == call.key for w in call_writes)]
    new = [w["blobs"] for w in (*writes, *call_writes)]
    done.dropped = _digests(old) - _digests(new)
    run_params = _run_params(run, rows, run_id, redactor, sealer, run_ref, head_digest, done)
    done.counts = redactor.counts
    done.rows, done.calls = len(writes), len(call_writes)
    pending = redactor.sink.pending
    done.blobs_new = len(pending)
    if dry_run or not (writes or call_writes or run_params):
        return done
    if pending and target is not None:
        yield Query("blob_guard_shared")  # held until commit: gc takes it exclusively
        target.put_all(pending)  # durable before the rows that reference them commit
        yield from target.write(pending, now)
    if writes:
        yield Query("redact_row", many=writes)
    if call_writes:
        yield Query("redact_call", many=call_writes)
    if run_params is not None:
        yield Query("reseal_run", run_params)
    done.record = yield from _audit(run_ref, run_id, rows[-1].step if rows else None, done, audit, now, sealer)
    return done


def _digests(columns: list[Any]) -> set[str]:
    out: set[str] = set()
    for column in columns:
        if column:
            out.update(codec.decode(column))
    return out


def _fetcher(target: BlobTarget | None, fetched: dict[str, bytes]) -> Any:
    def fetch(digests: list[str]) -> Any:
        if target is None or not digests:
            return {}
        return target.fetch(digests, fetched)

    return fetch


def _opened(row: Any, run_id: str, sealer: Sealer | None) -> _Row:
    def plain(value: Any, column: str) -> bytes | None:
        if value is None:
            return None
        value = bytes(value)
        if sealer is None or not value:
            return value
        return sealer.open(value, run_id, row.step, column)

    messages = plain(row.messages, "messages")
    bodies = messages.split(b"\n") if messages and row.added else []
    return _Row(
        step=row.step,
        header=plain(row.header, "header") or b"",
        bodies=bodies,
        chains=plain(row.chains, "chains"),
        first_seq=row.first_seq,
        ranges=parse_ranges(row.ranges) if not row.pruned else (),
        pruned=bool(row.pruned),
    )


def _redact_row(row: _Row, redactor: ValueRedactor, done: RunRedacted) -> None:
    # Bodies are named as a save names them: their index in the view of the row that added them.
    count = sum(end - start for start, end in row.ranges)
    first_index = count - len(row.bodies) if not row.pruned else row.first_seq
    for index, body in enumerate(row.bodies):
        new = redactor.body(body, f"messages[{first_index + index}]")
        if new is not None:
            row.bodies[index] = new
            row.changed_bodies = True
    if row.pruned or not row.header:
        return  # a pruned row keeps only the bodies later views see
    header = codec.decode(row.header)
    changed = False
    if redactor.redaction.might_match(row.header) or b'"$blob"' in row.header:
        for name in VALUE_FIELDS:
            value = header.get(name)
            if value is None:
                continue
            new_value = redactor.value(value, name)
            if new_value is not None:
                header[name] = new_value
                changed = True
        labels = header.get("labels") or {}
        new_labels = _labels(labels, redactor, done)
        if new_labels is not None:
            header["labels"] = new_labels
            changed = True
        counters = header.get("counters") or {}
        new_counters = redactor.strings(counters, "counters", values_too=False)
        if new_counters is not None:
            header["counters"] = new_counters
            changed = True
    if changed:
        row.header = codec.encode(header)
        row.changed_header = True


def _labels(labels: dict[str, str], redactor: ValueRedactor, done: RunRedacted) -> dict[str, str] | None:
    """Label values redacted as a save scrubs them; keys, and the labels adapters resolve
    runs by, are left (counted in ``done.left``)."""
    out, changed = dict(labels), False
    for key, value in labels.items():
        if redactor.redaction.finds_in_text(key):
            done.left["label key"] += 1
        if key.startswith(RESOLVING_LABELS):
            if redactor.redaction.finds_in_text(value):
                done.left["adapter label"] += 1
            continue
        new = redactor.strings({"": value}, "labels", values_too=True)
        if new is not None:
            out[key] = new[""]
            changed = True
    return out if changed else None


def _chains(rows: list[_Row], body_of: dict[int, bytes]) -> dict[int, bytes]:
    """Every seq's chain value, walked along the views that see them (each seq once)."""
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


def _row_params(
    row: _Row, chains: dict[int, bytes] | None, run_id: str, sealer: Sealer | None, run_ref: int
) -> dict[str, Any] | None:
    """The row's new columns, sealed for its place; None when nothing in it changed."""
    new_chains = row.chains
    if chains is not None and row.chains is not None and row.bodies:
        new_chains = b"".join(chains[row.first_seq + index] for index in range(len(row.bodies)))
    header = row.header
    if chains is not None and not row.pruned and header:
        fields = codec.decode(header)
        last = row.ranges[-1][1] - 1 if row.ranges else None
        value = (chains.get(last, codec.EMPTY_CHAIN) if last is not None else codec.EMPTY_CHAIN).hex()
        if fields["messages"]["chain"] != value:
            fields["messages"]["chain"] = value
            header = codec.encode(fields)
    if not row.changed_bodies and header == row.header and new_chains == row.chains and not row.changed_header:
        return None
    messages = b"\n".join(row.bodies) if row.bodies else None
    plain_digest = codec.digest(header) if header else b""
    blobs = digests_json(stored_digests((header, *row.bodies)))

    def sealed(value: bytes | None, column: str) -> bytes | None:
        if value is None or sealer is None or not value:
            return value
        return sealer.seal(value, run_id, row.step, column)

    return {
        "run_ref": run_ref,
        "step": row.step,
        "header": sealed(header, "header"),
        "digest": (sealer.keyed(plain_digest) if sealer is not None and header else plain_digest),
        "messages": sealed(messages, "messages"),
        "chains": sealed(new_chains, "chains"),
        "blobs": blobs,
    }


def _redact_call(
    call: Any, run_id: str, redactor: ValueRedactor, sealer: Sealer | None, run_ref: int, done: RunRedacted
) -> dict[str, Any] | None:
    """A journal entry redacted as ``stored_result`` writes one; None when nothing was found."""
    if call.result is None:
        return None
    place = "call:" + call.key
    body = bytes(call.result) if sealer is None else sealer.open(call.result, run_id, call.step, place)
    before = Counter(redactor.counts)
    data = codec.decode(body)
    if not redactor.redaction.might_match(body) and b'"$blob"' not in body:
        return None
    state = redactor.value({"result": data["value"]}, "state")
    if state is None:
        return None
    found = redactor.counts - before
    done.steps[call.step] = done.steps.get(call.step, 0) + sum(found.values())
    # A rule's marker or a literal value's replaces the value for good (the entry replays
    # redacted); a registered secret's reference does not count (stored_result's rule).
    data["redacted"] = int(data.get("redacted", 0)) + sum(
        count for rule, count in found.items() if not rule.startswith("secret:") or rule.startswith("secret:value-")
    )
    data["value"] = state["result"]
    new_body = codec.encode(data)
    digest = entry_digest(call.key, new_body)
    return {
        "run_ref": run_ref,
        "key": call.key,
        "result": new_body if sealer is None else sealer.seal(new_body, run_id, call.step, place),
        "digest": digest if sealer is None else sealer.keyed(digest),
        "blobs": digests_json(find_stored_refs(data["value"], [])),
    }


def _run_params(
    run: Any,
    rows: list[_Row],
    run_id: str,
    redactor: ValueRedactor,
    sealer: Sealer | None,
    run_ref: int,
    head_digest: bytes | None,
    done: RunRedacted,
) -> dict[str, Any] | None:
    """The run row's content columns after the redaction; None when none changed."""
    labels_text = run.labels if sealer is None else sealer.open_labels(run.labels, run_id)
    labels = codec.decode(labels_text)
    counters_text = run.counters
    if counters_text is not None and sealer is not None:
        counters_text = sealer.open_json(counters_text, run_id, "counters")
    error = run.last_error
    if error is not None and sealer is not None:
        error = sealer.open_text(error, run_id, "last_error")
    head = codec.decode(rows[-1].header) if rows and rows[-1].header and not rows[-1].pruned else None
    changed = head_digest is not None
    new_labels = labels
    if head is not None and head.get("labels") != labels:
        new_labels, changed = head["labels"], True
    else:
        scrubbed = _labels(labels, redactor, RunRedacted(run_id))
        if scrubbed is not None:
            new_labels, changed = scrubbed, True
    new_counters_text = counters_text
    if counters_text is not None and head is not None:
        counters = codec.decode(counters_text)
        if list(counters) != list(head.get("counters") or {}):
            new_counters_text, changed = codec.encode(head["counters"]).decode(), True
    new_error = error
    if error is not None:
        scrubbed_error = redactor.strings({"": error}, "last_error", values_too=True)
        if scrubbed_error is not None:
            new_error, changed = scrubbed_error[""], True
    if not changed:
        return None
    labels_out = codec.encode(new_labels).decode()
    del done
    return {
        "run_ref": run_ref,
        "labels": labels_out if sealer is None else sealer.seal_labels(labels_out, run_id),
        "counters": None
        if new_counters_text is None
        else (new_counters_text if sealer is None else sealer.seal_json(new_counters_text, run_id, "counters")),
        "error": None
        if new_error is None
        else (new_error if sealer is None else sealer.seal_text(new_error, run_id, "last_error")),
        "head_digest": head_digest if head_digest is not None else run.head_digest,
    }


def _audit(
    run_ref: int,
    run_id: str,
    head_step: int | None,
    done: RunRedacted,
    audit: dict[str, Any],
    now: int,
    sealer: Sealer | None,
) -> Op[dict[str, Any]]:
    """Write (or complete) this call's audit record of the run: one per run per call."""
    existing = yield Query("redaction_record", {"run_ref": run_ref, "redaction_id": audit["id"]})
    record = dict(audit)
    counts: Counter[str] = Counter(done.counts)
    steps: Counter[str] = Counter({str(step): count for step, count in done.steps.items()})
    if existing:
        earlier = codec.decode(existing[0].record)
        counts.update(earlier.get("counts", {}))
        steps.update(earlier.get("steps", {}))
        record["first_at"] = earlier.get("first_at", earlier.get("at", now))
    else:
        record["first_at"] = now
    record.update(at=now, counts=dict(counts), steps=dict(steps), head_step=head_step)
    body = codec.encode(record)
    mac = record_mac(run_id, body, sealer)
    yield Query(
        "put_redaction_record",
        {
            "run_ref": run_ref,
            "redaction_id": audit["id"],
            "head_step": head_step,
            "now": now,
            "record": body.decode(),
            "mac": mac,
        },
    )
    return record


def record_mac(run_id: str, body: bytes, sealer: Sealer | None) -> bytes:
    """An audit record's check value: SHA-256 of run id and record, keyed under the index key
    on an encrypted store (like the checkpoint digests), so only a key holder can forge one."""
    plain = codec.digest(run_id.encode("utf-8", "surrogatepass") + b"\x1f" + body)
    return plain if sealer is None else sealer.keyed(plain)
