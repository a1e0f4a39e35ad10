"""Redaction after the fact (issue 37): ``store.redact`` of the planted value, on the whole
store or on one run (and so its forks), taken among every other operation.

The model predicts, from its own content alone: which runs change (a selected run with the
planted value in any step or journal result), which forks are reported (every run forked from
a chosen one, forks of forks too, by the parent the model's checkpoints hold), that each changed
run has exactly one audit record (the same request again adds to it: a record is keyed by the
request's shape), and what every load returns afterwards (``Model.redacted``: the marker in the
value's place, everywhere). A checkpoint object the machine keeps for saves
in place whose run's head the redaction rewrote is marked stale (``Context.stale``): its next
save must be refused with ``Conflict`` (it would write the value back), and the object is then
dropped as after any Conflict. ``machine.STORE_WIDE`` holds ``redact``: every run is loaded
and checked after one. After a redaction of the whole plain store, no byte of it (SQLite files,
blob files, PostgreSQL rows, S3 objects) holds the value raw.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from safepoint import Redaction

from .configurations import Config
from .context import Context, Finding, Outcome, attempt, expect
from .invariants import _postgres_rows, s3_objects
from .model import PLANTED
from .ops_checkpoints import _pick


def args_of(config: Config) -> st.SearchStrategy[dict[str, Any]]:
    del config
    return st.fixed_dictionaries({"whole": st.booleans(), "run": st.integers(0, 7)})


def _forks_of(ctx: Context, chosen: str) -> set[str]:
    """Every run forked from ``chosen``, forks of forks too (the parent is kept by every save)."""
    parent = {}
    for run_id, run in ctx.model.runs.items():
        ref = run.checkpoints[run.head]["parent"]
        parent[run_id] = None if ref is None else ref["run_id"]
    found: set[str] = set()
    frontier = {chosen}
    while frontier:
        frontier = {run_id for run_id, source in parent.items() if source in frontier} - found - {chosen}
        found |= frontier
    return found


def act_redact(ctx: Context, args: dict[str, Any]) -> Outcome:
    run_ids = None if args["whole"] else [_pick(ctx.run_ids(), args["run"])]
    store = ctx.world.store
    outcome = attempt(ctx, lambda: store.redact(Redaction(values=[PLANTED]), run_ids=run_ids), "redact")
    if outcome.error is None:
        outcome.extra["records"] = {
            run_id: attempt(ctx, lambda rid=run_id: store.redactions(rid), f"redactions({run_id!r})")
            for run_id in ctx.run_ids()
        }
    outcome.extra["run_ids"] = run_ids
    return outcome


def update_redact(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    expect(outcome, None, "redact")
    done, run_ids = outcome.value, outcome.extra["run_ids"]
    forks = set() if run_ids is None else _forks_of(ctx, run_ids[0])
    selected = set(ctx.model.runs) if run_ids is None else {run_ids[0], *forks}
    if done.failed:
        raise Finding(f"redact failed on runs {sorted(run_id for run_id, _ in done.failed)}")
    if sorted(done.forks) != sorted(forks):
        raise Finding(f"redact reports the forks {sorted(done.forks)}; the model's are {sorted(forks)}")
    changed = set()
    for run_id in sorted(selected):
        run = ctx.model.runs[run_id]
        head = run.checkpoints[run.head]
        if ctx.model.redacted(run_id):
            changed.add(run_id)
            held = ctx.objects.get(run_id)
            if held is not None and run.checkpoints[run.head] != head:
                ctx.stale[run_id] = held[0]  # its next save would write the value back: Conflict
    reported = {run.run_id for run in done.runs}
    if reported != changed:
        raise Finding(f"redact reports the runs {sorted(reported)}; the model changed {sorted(changed)}")
    for run in done.runs:
        if run.left or run.record is None or run.counts.get("secret:value-1", 0) < 1:
            raise Finding(
                f"redact's report of {run.run_id!r}: left {dict(run.left)}, counts {dict(run.counts)}"
            )
    for run_id, records in outcome.extra["records"].items():
        expect(records, None, f"redactions({run_id!r})")
        want = ctx.model.runs[run_id].redactions
        if len(records.value) != want or not all(record.intact for record in records.value):
            raise Finding(
                f"redactions({run_id!r}) holds {len(records.value)} records"
                f" (intact: {[r.intact for r in records.value]}); the model expects {want}, intact"
            )
    if run_ids is None and not ctx.model.encrypted:
        for where, data in _stored_bytes(ctx):
            if PLANTED.encode() in data:
                raise Finding(f"after redacting the whole store the value is still in {where}")


def _stored_bytes(ctx: Context) -> list[tuple[str, bytes]]:
    """Every byte of the tenant's store the machine can read: its SQLite files and blob files,
    every column of its rows of PostgreSQL's safepoint tables, its S3 objects."""
    world = ctx.world
    out = [(path.name, path.read_bytes()) for path in world.files()]
    if world.schema is not None:
        rows = _postgres_rows(world.url, world.schema, world.tenant)
        out += [(f"PostgreSQL table {table}", data) for table, data in rows]
    out += [(f"S3 object {key}", body) for key, body in s3_objects(world)]
    return out
