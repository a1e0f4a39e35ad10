"""The cross-tenant probes: tenant A's handle aimed at tenant B's names, on any backend.

``seed_pair(a, b)`` fills two tenants of one store with runs of the same ids
(``redact_seed.seed``: messages, state, journal entries, blobs, forks), each
tenant with its own secret value, and B with runs A lacks. ``probe(a, b,
seeded)`` then does, as A, everything a handle can do to a run or a blob named
by B — read, list, load, history, fork, delete, queue calls, redaction
records, the journal, a blob by B's digest — and the whole-store calls (claim
until empty, gc, verify, redact B's value, save a run id B holds), and returns
what went wrong: each call on a name of B's must end exactly as it ends on a
name nobody holds (the same error, the same message but for the name — "0
tells"), whole-store calls must touch nothing of B's ("0 successes"), and B
must read back exactly as before.
"""

from __future__ import annotations

import copy
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from redact_seed import Seeded, seed
from safepoint import Checkpoint, NotFound, Redaction, SafepointError, Store
from safepoint.fixtures import read_fixture_run, write_fixture
from safepoint.store.verifying import verify_store

VALUE_A = "tenant-a-only:Kv3\u00e9-pine-1187"
VALUE_B = "tenant-b-only:Zq9\u00df-fern-5521"


def seed_pair(a: Store, b: Store, *, big: int = 300) -> tuple[Seeded, Seeded]:
    """B with 6 runs, A with 4 of the same ids and 2 of its own, so each holds ids the other
    does not; a fork in each."""
    seeded_a = seed(a, 4, seed=1, value=VALUE_A, big=big, forks=1, threads=2)
    extra = seed(a, 2, seed=2, value=VALUE_A, big=big, forks=0, threads=2)  # ids B does not hold
    seeded_a.run_ids += extra.run_ids
    seeded_a.holding += extra.holding
    return seeded_a, seed(b, 6, seed=1, value=VALUE_B, big=big, forks=1, threads=2)


def snapshot(store: Store) -> dict[str, Any]:
    """Everything a tenant reads back: runs, each run's head, history, journal, blobs, records."""
    shot: dict[str, Any] = {}
    for info in sorted(store.runs(limit=1000), key=lambda r: r.run_id):
        run_id = info.run_id
        shot[run_id] = {
            "info": (info.status, info.head_step, info.labels),
            "head": store.load(run_id).to_dict(),
            "history": [(c.step, c.digest) for c in store.history(run_id)],
            "calls": [(r.key, r.step, r.result) for r in store.recorded_calls(run_id)],
            "redactions": [r.redaction_id for r in store.redactions(run_id)],
        }
    return shot


def _outcome(call: Callable[[], Any], names: tuple[str, ...]) -> tuple[str, str]:
    """How ``call`` ended: ("ok", "") or the error's type and its message with ``names`` blanked."""
    try:
        call()
    except SafepointError as exc:
        text = str(exc)
        for name in names:
            text = text.replace(name, "<name>")
        return type(exc).__name__, text
    return "ok", ""


def _blob_refs(store: Store, run_id: str) -> list[dict[str, Any]]:
    """The ``{"$blob": …}`` references in a run's head, as stored."""
    found: list[dict[str, Any]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "$blob" in value:
                found.append(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(store.load(run_id, fetch_blobs=False).to_dict())
    return found


def probe(a: Store, b: Store, seeded_a: Seeded, seeded_b: Seeded, b_value: str) -> list[str]:
    """Everything tenant A's handle ``a`` can try against tenant B's names (and ``b_value``, the
    secret only B's runs hold); what leaked or changed. An empty list is the pass."""
    faults: list[str] = []
    before_b = snapshot(b)
    only_b = [run_id for run_id in seeded_b.run_ids if run_id not in seeded_a.run_ids]
    assert only_b, "the seeds give B runs that A does not hold"
    refs_b = _blob_refs(b, seeded_b.holding[0])
    assert refs_b, "B's runs hold blobs"

    per_name: dict[str, Callable[[str], Any]] = {
        "load": a.load,
        "run": a.run,
        "history": a.history,
        "forks": a.forks,
        "fork": lambda name: a.fork(name, new_run_id="probe-" + uuid.uuid4().hex[:8]),
        "recorded_calls": a.recorded_calls,
        "redactions": a.redactions,
        "enqueue": a.enqueue,
        "requeue": a.requeue,
        "cancel": a.cancel,
        "delete_run": a.delete_run,
        "verify": lambda name: verify_store(a, name),
    }
    for what, call in per_name.items():
        for name in only_b:
            nobody = "nobody-" + uuid.uuid4().hex[:12]
            theirs = _outcome(lambda c=call, n=name: c(n), (name,))
            unknown = _outcome(lambda c=call, n=nobody: c(n), (nobody,))
            if theirs != unknown:
                faults.append(f"{what} of B's run ends {theirs}, of nobody's {unknown}")
    for ref in refs_b:
        forged = copy.deepcopy(ref)
        forged["$blob"]["sha256"] = uuid.uuid4().hex * 2
        theirs = _outcome(lambda r=ref: a.fetch_blob(r), (ref["$blob"]["sha256"],))
        unknown = _outcome(lambda r=forged: a.fetch_blob(r), (forged["$blob"]["sha256"],))
        if theirs != unknown:
            faults.append(f"fetch_blob of B's digest ends {theirs}, of nobody's {unknown}")

    # A fixture exported from B (its blob references as stored) imported as a run of A's: A
    # gets a run whose blob it does not have, exactly as with a digest nobody stored.
    with tempfile.TemporaryDirectory() as folder:
        exported = Path(folder) / "from-b.json"
        write_fixture(b.load(seeded_b.holding[0], fetch_blobs=False), exported)
        digest = refs_b[0]["$blob"]["sha256"]
        forged_digest = uuid.uuid4().hex * 2
        forged = Path(folder) / "forged.json"
        forged.write_text(exported.read_text().replace(digest, forged_digest))
        ends = []
        for fixture, name in ((exported, digest), (forged, forged_digest)):
            run_id = "imported-" + uuid.uuid4().hex[:8]
            checkpoint, _calls = read_fixture_run(fixture, run_id)
            a.save(checkpoint)
            ends.append(_outcome(lambda r=run_id: a.load(r), (name, run_id)))
            a.delete_run(run_id)  # a run whose blob is missing: not A's to keep
        if ends[0] != ends[1] or ends[0][0] == "ok":
            faults.append(f"a fixture naming B's blob imports as {ends[0]}, one naming nobody's as {ends[1]}")

    # Whole-store calls: they reach A's runs only.
    listed = {info.run_id for info in a.runs(limit=1000)}
    if {n for n in listed if not n.startswith(("probe-", "imported-"))} - set(seeded_a.run_ids):
        faults.append("A's listing shows runs A never made")
    for run_id in seeded_b.run_ids:
        try:
            b.enqueue(run_id)
        except NotFound:
            faults.append("B lost a run to A's probes")
    a.enqueue(seeded_a.run_ids[0])  # A's own queue is not empty: claims work, on A's runs
    before_b = snapshot(b)  # the queue calls changed B's own state: compare from here
    claimed: list[str] = []
    while (lease := a.claim("probe-worker", lease=60)) is not None:
        claimed.append(lease.run_id)
        a.release(lease)
    if set(claimed) - set(seeded_a.run_ids):
        faults.append("A claimed a run of B's")
    a.collect_garbage()
    report = verify_store(a)
    if not report.ok:
        faults.append("A's store does not verify after the probes")
    redacted = a.redact(Redaction(values=[b_value]))
    if redacted.runs or redacted.blobs_deleted:
        faults.append("a redaction of B's value changed runs through A's handle")
    # A run id B holds is free for A: a new run of A's, B's untouched.
    taken = only_b[0]
    a.save(Checkpoint(run_id=taken, messages=[{"role": "user", "content": "a's own"}]))
    if a.load(taken).messages != [{"role": "user", "content": "a's own"}]:
        faults.append("A's save of a run id B holds did not make A's own run")
    if snapshot(b) != before_b:
        faults.append("B reads back differently after A's probes")
    return faults
