"""THE TABLE: every operation the machine can take, one entry each.

An entry names the operation, what it draws (``args``: a hypothesis strategy
of plain data, so a printed step can be replayed), when it applies (``pre``:
on the model and the row's settings), what it does to the store (``act``) and
the model's update (``update``: the outcome the model predicts, checked, then
applied). A later feature (redaction, backups, tenants) adds one entry here
and, if it keeps new state, a field in ``model.py`` — as the call journal did
(``ops_journal.py``, ``ops_journal_stored.py``; ``model.Run.calls``) and redaction
did (``ops_redact.py``; ``model.Run.redactions``). Tenants added a factor
(``configurations.FACTORS["tenant"]``), a second tenant to every example (each
entry is a rule for each tenant, machine.py) and four entries (``ops_tenants.py``:
a run id only the other tenant holds; verify and backup of a tenant; erasing one).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from . import ops_checkpoints as cps
from . import ops_journal as journal
from . import ops_journal_stored as stored
from . import ops_queue as queue
from . import ops_redact as redact
from . import ops_store as whole
from . import ops_tenants as tenants
from .configurations import Config
from .context import Context, Outcome
from .values import LABELS, contents

Act = Callable[[Context, dict[str, Any]], Outcome]
Update = Callable[[Context, dict[str, Any], Outcome], None]


@dataclass(frozen=True)
class Op:
    name: str
    args: Callable[[Config], st.SearchStrategy[dict[str, Any]]]
    pre: Callable[[Context], bool]
    act: Act
    update: Update


# Error texts a worker records: a registered secret inside, control characters, a huge one.
ERROR_TEXTS = (
    "RuntimeError: tool failed",
    "TimeoutError: token {secret} expired",
    "ValueError: bad\x00value\n\x1b[31mred",
    "E" * 2000,
)


def _index() -> st.SearchStrategy[int]:
    return st.integers(0, 7)


def _change(config: Config) -> st.SearchStrategy[dict[str, Any]]:
    return contents(allow_bytes=config.blobs != "inline")


def _has_runs(ctx: Context) -> bool:
    return bool(ctx.model.runs)


def _has_free_id(ctx: Context) -> bool:
    return bool(ctx.free_ids())


def _durable(name: str) -> Callable[[Context], bool]:
    return lambda ctx: ctx.world.config.allows(name)


def _lease_on_a_run(ctx: Context) -> bool:
    return any(lease.run_id in ctx.model.runs for lease in ctx.leases)


def _unleased_pair(ctx: Context) -> bool:
    now = time.time()
    return len([r for r in ctx.run_ids() + ctx.free_ids() if not ctx.model.live_lease(r, now)]) >= 2


TABLE: tuple[Op, ...] = (
    Op(
        "save_fresh",
        lambda c: st.fixed_dictionaries({"run": _index(), "change": _change(c), "enqueue": st.booleans()}),
        lambda ctx: True,
        cps.act_save_fresh,
        cps.update_save,
    ),
    Op(
        "save_in_place",
        lambda c: st.fixed_dictionaries({"run": _index(), "change": _change(c)}),
        lambda ctx: bool(ctx.objects),
        cps.act_save_in_place,
        cps.update_save,
    ),
    Op(
        "rewrite_history",
        lambda c: st.fixed_dictionaries({"run": _index(), "change": _change(c)}),
        _has_runs,
        cps.act_rewrite,
        cps.update_save,
    ),
    Op(
        "save_together",
        lambda c: st.fixed_dictionaries(
            {"run": _index(), "other": _index(), "change": _change(c), "other_change": _change(c)}
        ),
        _unleased_pair,
        cps.act_save_together,
        cps.update_save_together,
    ),
    Op(
        "fork",
        lambda c: st.fixed_dictionaries(
            {
                "run": _index(),
                "step": _index(),
                "new": _index(),
                "labels": st.none() | st.sampled_from(LABELS),
            }
        ),
        lambda ctx: _has_runs(ctx) and _has_free_id(ctx),
        cps.act_fork,
        cps.update_fork,
    ),
    Op(
        "load",
        lambda c: st.fixed_dictionaries({"run": _index(), "step": _index()}),
        _has_runs,
        cps.act_load,
        cps.update_load,
    ),
    Op(
        "history",
        lambda c: st.fixed_dictionaries({"run": _index()}),
        _has_runs,
        cps.act_history,
        cps.update_history,
    ),
    Op(
        "runs",
        lambda c: st.fixed_dictionaries(
            {
                "labels": st.sampled_from(({}, {"team": "blue"}, {"tier": "gold"})),
                # updated_since / updated_until: no bound, a window holding every run, one before all
                "window": st.sampled_from((None, "all", "before")),
                # the listing's order: the default (newest first), or a sort key either way
                "sort": st.sampled_from((None, "created", "updated", "run_id", "status", "step")),
                "descending": st.booleans(),
            }
        ),
        lambda ctx: True,
        cps.act_runs,
        cps.update_runs,
    ),
    Op(
        "counter_sums",
        lambda c: st.fixed_dictionaries(
            {
                "labels": st.sampled_from(({}, {"team": "blue"}, {"tier": "gold"})),
                "window": st.sampled_from((None, "all", "before")),
            }
        ),
        lambda ctx: True,
        cps.act_counter_sums,
        cps.update_counter_sums,
    ),
    Op(
        "retention_gc",
        lambda c: st.fixed_dictionaries(
            {
                "run": _index(),
                "keep": st.none() | st.integers(1, 2),
                "keep_for": st.sampled_from((None, "none", "all")),  # the ages: nothing is so young, or all
                "finished_after": st.sampled_from((None, "now", "never")),
            }
        ),
        _has_runs,
        cps.act_retention,
        cps.update_retention,
    ),
    Op(
        "delete",
        lambda c: st.fixed_dictionaries({"run": _index()}),
        _has_runs,
        cps.act_delete,
        cps.update_delete,
    ),
    Op(
        "enqueue",
        lambda c: st.fixed_dictionaries({"run": _index()}),
        _has_runs,
        queue.act_enqueue,
        queue.update_enqueue,
    ),
    Op(
        "claim",
        lambda c: st.fixed_dictionaries({"live": st.booleans()}),
        lambda ctx: True,
        queue.act_claim,
        queue.update_claim,
    ),
    Op(
        "heartbeat",
        lambda c: st.fixed_dictionaries({"lease": _index()}),
        lambda ctx: bool(ctx.leases),
        queue.act_heartbeat,
        queue.update_heartbeat,
    ),
    Op(
        "release",
        lambda c: st.fixed_dictionaries(
            {
                "lease": _index(),
                "requeue": st.booleans(),
                "status": st.sampled_from((None, "done", "paused")),
                "attempts": st.sampled_from(("keep", "reset", "uncount")),
                "retry": st.booleans(),
                "error": st.one_of(st.none(), st.sampled_from(ERROR_TEXTS)),
            }
        ),
        lambda ctx: bool(ctx.leases),
        queue.act_release,
        queue.update_release,
    ),
    Op(
        "queue_reads",
        lambda c: st.just({}),
        lambda ctx: True,
        queue.act_queue_reads,
        queue.update_queue_reads,
    ),
    Op(
        "save_under_lease",
        lambda c: st.fixed_dictionaries({"lease": _index(), "change": _change(c)}),
        _lease_on_a_run,
        queue.act_save_under_lease,
        queue.update_save_under_lease,
    ),
    Op(
        "old_worker",
        lambda c: st.just({}),
        lambda ctx: _durable("old_worker")(ctx) and any(run.queued for run in ctx.model.runs.values()),
        queue.act_old_worker,
        queue.update_old_worker,
    ),
    Op("redact", redact.args_of, _has_runs, redact.act_redact, redact.update_redact),
    Op("record_call", journal.args_of, _has_runs, journal.act_record_call, journal.update_record_call),
    Op("call_intent", journal.args_of, _has_runs, journal.act_call_intent, journal.update_call_intent),
    Op(
        "recorded_call",
        journal.read_args,
        _has_runs,
        journal.act_recorded_call,
        journal.update_recorded_call,
    ),
    Op(
        "recorded_calls",
        journal.list_args,
        _has_runs,
        journal.act_recorded_calls,
        journal.update_recorded_calls,
    ),
    Op("verify_calls", stored.verify_args, _has_runs, stored.act_verify_calls, stored.update_verify_calls),
    Op("export_import", stored.export_args, _has_runs, stored.act_export_import, stored.update_export_import),
    Op(
        "schema_bump",
        lambda c: st.just({}),
        lambda ctx: _durable("schema_bump")(ctx) and ctx.model.chain_version < 3,
        whole.act_schema_bump,
        whole.update_schema_bump,
    ),
    Op("reopen", lambda c: st.just({}), _durable("reopen"), whole.act_reopen, whole.update_reopen),
    Op(
        "encrypt",
        lambda c: st.just({}),
        lambda ctx: _durable("encrypt")(ctx) and not ctx.model.encrypted,
        whole.act_encrypt,
        whole.update_encrypt,
    ),
    Op(
        "rekey",
        lambda c: st.just({}),
        lambda ctx: _durable("rekey")(ctx) and ctx.model.encrypted,
        whole.act_rekey,
        whole.update_rekey,
    ),
    Op(
        "sigkill_writer",
        lambda c: st.fixed_dictionaries(
            {
                "run": _index(),
                "changes": st.lists(contents(allow_bytes=False), min_size=2, max_size=4),
                "kill_after": _index(),
            }
        ),
        lambda ctx: _durable("sigkill_writer")(ctx) and _has_free_id(ctx),
        whole.act_sigkill_writer,
        whole.update_sigkill_writer,
    ),
    Op(
        "open_without_keyring",
        lambda c: st.fixed_dictionaries({"run": _index(), "change": _change(c)}),
        lambda ctx: _durable("open_without_keyring")(ctx) and _has_free_id(ctx),
        whole.act_open_without_keyring,
        whole.update_open_without_keyring,
    ),
    Op(
        "open_with_wrong_key",
        lambda c: st.fixed_dictionaries({"run": _index(), "change": _change(c), "index": st.booleans()}),
        lambda ctx: _durable("open_with_wrong_key")(ctx) and ctx.model.encrypted and _has_free_id(ctx),
        whole.act_open_with_wrong_key,
        whole.update_open_with_wrong_key,
    ),
    Op(
        "foreign_id",
        tenants.foreign_args,
        tenants.has_foreign_id,
        tenants.act_foreign_id,
        tenants.update_foreign_id,
    ),
    Op("verify", lambda c: st.just({}), lambda ctx: True, tenants.act_verify, tenants.update_verify),
    Op("backup", lambda c: st.just({}), tenants.can_back_up, tenants.act_backup, tenants.update_backup),
    Op("erase", lambda c: st.just({}), tenants.can_erase, tenants.act_erase, tenants.update_erase),
)
BY_NAME = {op.name: op for op in TABLE}
