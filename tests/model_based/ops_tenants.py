"""Operations across tenants (issue 38): a run id only the other tenant holds, the tenant's
whole-store checks (verify, backup), and erasing a tenant.

Every example runs two tenants of one store (machine.py); each operation of
the table acts on one of them, and after it the other must show exactly what
it showed before. These operations reach across, or act on the tenant whole:

* ``foreign_id``: every call of ``CALLS`` on a run id the *other* tenant holds
  and this one does not — load, history, run row, queue state, forks, fork,
  delete, enqueue, the journal's reads and writes, retention, redaction, a
  save at the step that would fit the other's run. Each must end exactly as
  the same call on an id nobody holds (``NOBODY``): the same error type with
  the same message, or the same value, the id aside — no success and no tell.
* ``verify``: ``verify_store`` of the tenant's handle finds no damage and
  walks exactly the tenant's model: its runs, checkpoints and entries.
* ``backup``: ``backup_store`` of the tenant's handle (SQLite with local
  blobs): the copy is complete, and opened it lists exactly the tenant's runs.
* ``erase``: ``safepoint.store.admin.erase_tenant`` of this tenant (its
  handle closed first, reopened after: the name starts a new tenant, encrypted
  again under the same keyring when it has one). Its model is emptied; the
  other tenant, checked whole after it (``machine.STORE_WIDE``), keeps every
  run, checkpoint, blob and entry. Not on ``memory://`` (private to its
  handle) nor for the implicit tenant of a SQLite store (its file is the
  store's own: refused). A SQLite store only ever opened with named tenants
  (no file of its own, the rows whose main tenant is named) is erased too: the
  machine found erase_tenant refusing it once, fixed since.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

import safepoint
from safepoint import Checkpoint, Redaction, Retention
from safepoint.store.admin import all_runs, backup_store, erase_tenant, verify_store
from safepoint.store.tenants import IMPLICIT

from .configurations import Config
from .context import Context, Finding, Outcome, attempt, expect
from .model import PLANTED, Model
from .ops_checkpoints import _pick
from .world import options_of

NOBODY = "run-nobody-holds"  # never saved by either tenant: the control of ``foreign_id``

# Each call of ``foreign_id``: (the tenant's context, the id, the id the other tenant's run
# would fit at) -> the call.
CALLS: dict[str, Any] = {
    "load": lambda ctx, rid, held: ctx.world.store.load(rid),
    "load_step": lambda ctx, rid, held: ctx.world.store.load(rid, held["step"]),
    "history": lambda ctx, rid, held: ctx.world.store.history(rid),
    "run": lambda ctx, rid, held: ctx.world.store.run(rid),
    "queue_state": lambda ctx, rid, held: ctx.world.store.queue_state(rid),
    "forks": lambda ctx, rid, held: ctx.world.store.forks(rid),
    "fork": lambda ctx, rid, held: ctx.world.store.fork(rid, held["step"], new_run_id=held["new"]),
    "delete": lambda ctx, rid, held: ctx.world.store.delete_run(rid),
    "enqueue": lambda ctx, rid, held: ctx.world.store.enqueue(rid),
    "prune": lambda ctx, rid, held: ctx.world.store.prune_run(rid, Retention(keep_last=1)),
    "recorded_calls": lambda ctx, rid, held: ctx.world.store.recorded_calls(rid),
    "recorded_call": lambda ctx, rid, held: ctx.world.store.recorded_call(rid, held["key"]),
    "record_call": lambda ctx, rid, held: ctx.world.store.record_call(rid, held["key"], {"forged": 1}),
    "verify_calls": lambda ctx, rid, held: ctx.world.store.verify_calls(rid),
    "redactions": lambda ctx, rid, held: ctx.world.store.redactions(rid),
    "redact": lambda ctx, rid, held: ctx.world.store.redact(Redaction(values=[PLANTED]), run_ids=[rid]),
    "save_next": lambda ctx, rid, held: ctx.world.store.save(Checkpoint(run_id=rid, step=held["next"])),
}


def foreign_args(config: Config) -> st.SearchStrategy[dict[str, Any]]:
    del config
    return st.fixed_dictionaries({"run": st.integers(0, 7)})


def foreign_ids(ctx: Context) -> list[str]:
    """The run ids the other tenant holds and this one does not."""
    assert ctx.other is not None
    return sorted(set(ctx.other.model.runs) - set(ctx.model.runs))


def has_foreign_id(ctx: Context) -> bool:
    return ctx.other is not None and bool(foreign_ids(ctx))


def act_foreign_id(ctx: Context, args: dict[str, Any]) -> Outcome:
    assert ctx.other is not None
    forged = _pick(foreign_ids(ctx), args["run"])
    run = ctx.other.model.runs[forged]
    keys = sorted(run.calls)
    held = {
        "step": run.head,  # the other tenant's steps and keys: what a guess would name
        "next": run.head + 1,
        "key": keys[0] if keys else "forged-key",
        "new": _pick([rid for rid in ctx.free_ids() if rid != forged] or [NOBODY + "-fork"], args["run"]),
    }
    pairs = {
        name: (
            attempt(
                ctx, lambda c=call: c(ctx, forged, held), f"{name} of a run id only the other tenant holds"
            ),
            attempt(ctx, lambda c=call: c(ctx, NOBODY, held), f"{name} of a run id nobody holds"),
        )
        for name, call in CALLS.items()
    }
    return Outcome(extra={"forged": forged, "pairs": pairs})


def _shown(outcome: Outcome, run_id: str) -> tuple[str, str]:
    """An outcome as comparable text, ``run_id`` written as ``<id>``: the error's type and
    message, or the value (a redaction's id aside: each request has its own)."""
    if outcome.error is not None:
        return type(outcome.error).__name__, str(outcome.error).replace(run_id, "<id>")
    value = outcome.value
    if dataclasses.is_dataclass(value) and hasattr(value, "redaction_id"):
        value = dataclasses.replace(value, redaction_id="")  # type: ignore[type-var]
    return "success", repr(value).replace(run_id, "<id>")


def update_foreign_id(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    """Nothing changes in either model: each call ends as on an id nobody holds."""
    forged = outcome.extra["forged"]
    for name, (tried, control) in outcome.extra["pairs"].items():
        got, want = _shown(tried, forged), _shown(control, NOBODY)
        if got != want:
            raise Finding(
                f"{name} of a run id only the other tenant holds: {got[0]} ({got[1][:200]});"
                f" on an id nobody holds: {want[0]} ({want[1][:200]})"
            )


# -- the tenant's whole-store checks -------------------------------------------------------------


def _counts(ctx: Context) -> tuple[int, int, int]:
    runs = ctx.model.runs.values()
    return len(runs), sum(len(run.checkpoints) for run in runs), sum(len(run.calls) for run in runs)


def act_verify(ctx: Context, args: dict[str, Any]) -> Outcome:
    return attempt(ctx, lambda: verify_store(ctx.world.store), "verify_store")


def update_verify(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    expect(outcome, None, "verify_store")
    report = outcome.value
    walked = (report.runs, report.checked, report.calls)
    if report.failures or walked != _counts(ctx):
        errors = sorted({failure["error"] for failure in report.failures})
        raise Finding(
            f"verify_store walked (runs, checkpoints, entries) {walked}, the model holds {_counts(ctx)};"
            f" {len(report.failures)} failures {errors}"
        )


def can_back_up(ctx: Context) -> bool:
    return ctx.world.config.backend == "sqlite" and ctx.world.config.blobs != "s3"


def act_backup(ctx: Context, args: dict[str, Any]) -> Outcome:
    world = ctx.world
    dest = world.folder / f"backup-{ctx.steps}-{world.tenant}.db"
    outcome = attempt(ctx, lambda: backup_store(world.store, dest), f"backup of tenant {world.tenant!r}")
    if outcome.error is None:
        options: dict[str, Any] = {"read_only": True, "blobs": False}
        if world.keyring is not None:
            options["encryption"] = world.keyring

        def listed() -> list[str]:
            with safepoint.open_store(f"sqlite:///{dest}", **options) as copy:
                return sorted(info.run_id for info in all_runs(copy))

        outcome.extra["listed"] = attempt(ctx, listed, "the backup's listing")
    return outcome


def update_backup(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    expect(outcome, None, "backup")
    report = outcome.value
    walked = (report.verified.runs, report.verified.checked, report.verified.calls)
    if not report.complete or walked != _counts(ctx):
        raise Finding(
            f"backup: complete {report.complete}, its check walked (runs, checkpoints, entries)"
            f" {walked}; the model holds {_counts(ctx)}"
        )
    listed = outcome.extra["listed"]
    expect(listed, None, "the backup's listing")
    if listed.value != sorted(ctx.model.runs):
        raise Finding(f"the backup lists {listed.value}; the tenant holds {sorted(ctx.model.runs)}")


# -- erasing a tenant --------------------------------------------------------------------------


def can_erase(ctx: Context) -> bool:
    config, world = ctx.world.config, ctx.world
    if not config.durable:
        return False
    if config.backend != "sqlite":
        return True
    return world.tenant != IMPLICIT


def act_erase(ctx: Context, args: dict[str, Any]) -> Outcome:
    world = ctx.world
    spec = world.spec(ctx.model.chain_version)
    options = {"blobs": options_of(spec)["blobs"]}
    if world.schema is not None:
        options["schema"] = world.schema

    def erase() -> Any:
        world.store.close()  # a tenant's writers stop before its erase (docs/tenants.md)
        try:
            return erase_tenant(world.url, world.tenant, **options)
        finally:
            world.store = world.open(chain_version=ctx.model.chain_version)

    return attempt(ctx, erase, f"erase tenant {world.tenant!r}")


def update_erase(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    expect(outcome, None, f"erase tenant {ctx.world.tenant!r}")
    old = ctx.model
    ctx.model = Model(policy=old.policy, encrypted=ctx.world.keyring_text is not None)
    ctx.model.chain_version = old.chain_version
    ctx.objects.clear()
    ctx.stale.clear()
    ctx.leases.clear()
