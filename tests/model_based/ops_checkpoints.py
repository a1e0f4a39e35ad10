"""Operations on runs and checkpoints: saves (fresh, in place, rewritten, together), fork, load,
history, listing, retention with gc (expiry included), delete. Each is an ``act`` (the store)
and an ``update`` (what the model predicts, checked, then applied); ``operations.TABLE`` joins
them to their preconditions and arguments."""

from __future__ import annotations

import copy
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from safepoint import Conflict, Retention
from safepoint.records import MAX_AGE

from .context import Context, Finding, Outcome, attempt, build, content_of, difference, expect, observed


def _pick(items: list[str], index: int) -> str:
    return items[index % len(items)]


def _resolve(ctx: Context) -> bool:
    return ctx.model.policy == "reference"


# -- save a fresh checkpoint: built from scratch each step, as from a request -----------


def act_save_fresh(ctx: Context, args: dict[str, Any]) -> Outcome:
    runs = ctx.run_ids() + ctx.free_ids()
    run_id = _pick(runs, args["run"])
    run = ctx.model.runs.get(run_id)
    base = None if run is None else run.checkpoints[run.head]
    step = 0 if run is None else run.head + 1
    content = content_of(args["change"], ctx.model.chain_version, base)
    ctx.remember(content)
    cp = build(run_id, step, content)
    outcome = attempt(ctx, lambda: ctx.world.store.save(cp), f"save({run_id!r}, {step})")
    if outcome.error is None and args.get("enqueue"):  # saved, then handed to the workers
        queued = attempt(ctx, lambda: ctx.world.store.enqueue(run_id), f"enqueue({run_id!r})")
        outcome.extra["enqueued"] = queued
    outcome.extra.update(run_id=run_id, step=step, content=content, cp=cp)
    return outcome


def update_save(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    run_id, step, content = outcome.extra["run_id"], outcome.extra["step"], outcome.extra["content"]
    what = f"save({run_id!r}, {step})"
    run = ctx.model.runs.get(run_id)
    fits = (run is None and step == 0) or (run is not None and step == run.head + 1)
    leased = ctx.model.live_lease(run_id, time.time())
    stale = ctx.stale.pop(run_id, None) is outcome.extra["cp"]  # held from before a redaction
    expect(outcome, None if fits and not leased and not stale else Conflict, what)
    if outcome.error is None:
        ctx.model.saved(run_id, step, content)
        ctx.objects[run_id] = (outcome.extra["cp"], content)
        if "enqueued" in outcome.extra:
            expect(outcome.extra["enqueued"], None, f"enqueue({run_id!r})")
            ctx.model.runs[run_id].queued = True
    else:
        ctx.objects.pop(run_id, None)


# -- save in place: the same object, step += 1, values changed --------------------------


def act_save_in_place(ctx: Context, args: dict[str, Any]) -> Outcome:
    run_id = _pick(sorted(ctx.objects), args["run"])
    cp, held = ctx.objects[run_id]
    change = args["change"]
    content = content_of(change, held["schema_version"], held)
    content["parent"] = held["parent"]
    ctx.remember(content)
    step = cp.step + 1
    cp.step = step
    cp.messages.append(copy.deepcopy(content["messages"][-1]))
    cp.counters = dict(content["counters"])
    for name, value in change["values"].items():
        setattr(cp, name, copy.deepcopy(value))
    cp.labels = dict(content["labels"])
    cp.status = content["status"]
    outcome = attempt(ctx, lambda: ctx.world.store.save(cp), f"save in place({run_id!r}, {step})")
    outcome.extra.update(run_id=run_id, step=step, content=content, cp=cp)
    return outcome


# -- rewrite history: the head loaded, its old turns summarized, saved as the next step --


def act_rewrite(ctx: Context, args: dict[str, Any]) -> Outcome:
    run_id = _pick(ctx.run_ids(), args["run"])
    run = ctx.model.runs[run_id]
    loaded = attempt(
        ctx, lambda: ctx.world.store.load(run_id, resolve_secrets=_resolve(ctx)), f"load({run_id!r})"
    )
    if loaded.error is not None:
        raise Finding(f"load({run_id!r}) of a run the model holds raised {type(loaded.error).__name__}")
    held = ctx.model.expected(run.checkpoints[run.head])
    content = content_of(args["change"], held["schema_version"], held, rewrite=True)
    ctx.remember(content)
    cp = loaded.value.next()
    cp.messages = copy.deepcopy(content["messages"])
    cp.counters = dict(content["counters"])
    for name, value in args["change"]["values"].items():
        setattr(cp, name, copy.deepcopy(value))
    cp.labels = dict(content["labels"])
    cp.status = content["status"]
    outcome = attempt(ctx, lambda: ctx.world.store.save(cp), f"rewrite({run_id!r})")
    outcome.extra.update(run_id=run_id, step=run.head + 1, content=content, cp=cp)
    return outcome


# -- fork ------------------------------------------------------------------------------


def act_fork(ctx: Context, args: dict[str, Any]) -> Outcome:
    source = _pick(ctx.run_ids(), args["run"])
    steps = sorted(ctx.model.runs[source].checkpoints)
    step = steps[args["step"] % len(steps)]
    new_id = _pick(ctx.free_ids(), args["new"])
    labels = args["labels"]
    outcome = attempt(
        ctx,
        lambda: ctx.world.store.fork(source, step, new_run_id=new_id, labels=labels),
        f"fork({source!r}, {step})",
    )
    outcome.extra.update(source=source, step=step, new_id=new_id)
    return outcome


def update_fork(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    source, step, new_id = outcome.extra["source"], outcome.extra["step"], outcome.extra["new_id"]
    expect(outcome, None, f"fork({source!r}, {step})")
    content = copy.deepcopy(ctx.model.runs[source].checkpoints[step])
    content["parent"] = {"run_id": source, "step": step}
    if args["labels"] is not None:
        content["labels"] = dict(args["labels"])
    ctx.model.saved(new_id, step, content)


# -- load any step, keep the object for saves in place -----------------------------------


def act_load(ctx: Context, args: dict[str, Any]) -> Outcome:
    run_id = _pick(ctx.run_ids(), args["run"])
    steps = sorted(ctx.model.runs[run_id].checkpoints)
    step = steps[args["step"] % len(steps)]
    outcome = attempt(
        ctx,
        lambda: ctx.world.store.load(run_id, step, resolve_secrets=_resolve(ctx)),
        f"load({run_id!r}, {step})",
    )
    outcome.extra.update(run_id=run_id, step=step)
    return outcome


def update_load(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    run_id, step = outcome.extra["run_id"], outcome.extra["step"]
    expect(outcome, None, f"load({run_id!r}, {step})")
    want = ctx.model.expected(ctx.model.runs[run_id].checkpoints[step])
    got = observed(outcome.value)
    if got != want:
        raise Finding(f"load({run_id!r}, {step}) differs from the model: {difference(got, want)}")
    ctx.objects[run_id] = (outcome.value, want)


# -- history, listing --------------------------------------------------------------------


def act_history(ctx: Context, args: dict[str, Any]) -> Outcome:
    run_id = _pick(ctx.run_ids(), args["run"])
    outcome = attempt(ctx, lambda: ctx.world.store.history(run_id), f"history({run_id!r})")
    outcome.extra["run_id"] = run_id
    return outcome


def update_history(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    run_id = outcome.extra["run_id"]
    expect(outcome, None, f"history({run_id!r})")
    if [info.step for info in outcome.value] != sorted(ctx.model.runs[run_id].checkpoints):
        raise Finding(f"history({run_id!r}) lists other steps than the model")


# Time windows whose outcome needs no clock: every run was updated inside the first, none in
# the second (both ends of a window are included).
_WINDOWS = {
    None: {},
    "all": {
        "updated_since": datetime(2000, 1, 1, tzinfo=UTC),
        "updated_until": datetime(2200, 1, 1, tzinfo=UTC),
    },
    "before": {"updated_since": None, "updated_until": datetime(2000, 1, 1, tzinfo=UTC)},
}


def act_runs(ctx: Context, args: dict[str, Any]) -> Outcome:
    wanted, window = args["labels"], _WINDOWS[args.get("window")]
    sort, descending = args.get("sort"), args.get("descending", True)
    order = {} if sort is None else {"sort": sort, "descending": descending}

    def pages() -> list[str]:
        found: list[str] = []
        cursor = None
        while True:
            page = ctx.world.store.runs(labels=wanted, limit=2, cursor=cursor, **window, **order)
            found += [info.run_id for info in page.items]
            cursor = page.next_cursor
            if cursor is None:
                return found

    return attempt(ctx, pages, f"runs(labels={wanted}, window={args.get('window')}, order={order})")


def update_runs(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    expect(outcome, None, "runs(labels=…)")
    wanted, window = args["labels"], args.get("window")
    model = set()
    if window != "before":
        model = {rid for rid, run in ctx.model.runs.items() if wanted.items() <= run.labels.items()}
    if args.get("sort") == "run_id" and outcome.value != sorted(outcome.value, reverse=args["descending"]):
        raise Finding(f"runs(sort='run_id') lists {outcome.value} out of order")
    if sorted(outcome.value) != sorted(model):  # every run once: a page repeating one is found here
        raise Finding(
            f"runs(labels={wanted}, window={window}) lists {sorted(outcome.value)}, the model {sorted(model)}"
        )


def act_counter_sums(ctx: Context, args: dict[str, Any]) -> Outcome:
    wanted, window = args["labels"], _WINDOWS[args.get("window")]
    return attempt(
        ctx,
        lambda: ctx.world.store.counter_sums(labels=wanted or None, **window),
        f"counter_sums(labels={wanted}, window={args.get('window')})",
    )


def update_counter_sums(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    """Each run the filters select counted once, its head's "saves" counter summed (a migration
    adds counters of its own and leaves that one)."""
    expect(outcome, None, "counter_sums(…)")
    wanted, window = args["labels"], args.get("window")
    runs = (
        []
        if window == "before"
        else [r for r in ctx.model.runs.values() if wanted.items() <= r.labels.items()]
    )
    found = outcome.value
    counted = sum(n for _, n, _ in found.hours)
    saves = sum(c.get("saves", 0) for _, _, c in found.hours)
    model_saves = sum(r.checkpoints[r.head]["counters"].get("saves", 0) for r in runs)
    if (counted, found.unreadable, saves) != (len(runs), 0, model_saves):
        raise Finding(
            f"counter_sums(labels={wanted}, window={window}) counts {counted} runs ({found.unreadable} "
            f"unreadable) and {saves} saves, the model {len(runs)} runs and {model_saves} saves"
        )


# -- retention and gc, delete -------------------------------------------------------------


# Durations whose outcome needs no clock: every checkpoint and run is older than zero, and
# none is older than the longest duration a policy takes.
_AGES = {"none": timedelta(0), "now": timedelta(0), "all": MAX_AGE, "never": MAX_AGE, None: None}
_FINISHED = frozenset({"done", "failed", "cancelled"})


def act_retention(ctx: Context, args: dict[str, Any]) -> Outcome:
    run_id = _pick(ctx.run_ids(), args["run"])
    policy = Retention(
        keep_last=args.get("keep"),
        keep_for=_AGES[args.get("keep_for")],
        delete_finished_after=_AGES[args.get("finished_after")],
    )

    def prune_and_collect() -> None:
        ctx.world.store.prune_run(run_id, policy)
        if ctx.world.config.blobs != "inline":  # with blobs=False there is nothing to collect
            ctx.world.store.collect_garbage()

    outcome = attempt(ctx, prune_and_collect, f"prune({run_id!r}) and gc")
    outcome.extra["run_id"] = run_id
    return outcome


def update_retention(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    """Retention as the store's rules say: a finished run (its row's status) whose head is older
    than ``delete_finished_after`` is deleted whole, its entries with it (the store-wide label
    that keeps a finished run aside, which no drawn label is); else the head, the newest
    ``keep_last`` and those younger than ``keep_for`` are kept (all without either), and the
    pruned checkpoints' entries go with them."""
    run_id = outcome.extra["run_id"]
    expect(outcome, None, f"prune({run_id!r}) and gc")
    run = ctx.model.runs[run_id]
    if args.get("finished_after") == "now" and run.status in _FINISHED:
        ctx.model.deleted(run_id)
        ctx.objects.pop(run_id, None)
        return
    steps = sorted(run.checkpoints)
    keep_last, keep_for = args.get("keep"), args.get("keep_for")
    if (keep_last is None and keep_for is None) or keep_for == "all":
        return
    kept = {run.head, *(steps[-keep_last:] if keep_last else ())}
    ctx.model.pruned(run_id, [step for step in steps if step not in kept])  # their entries go too


def act_delete(ctx: Context, args: dict[str, Any]) -> Outcome:
    run_id = _pick(ctx.run_ids(), args["run"])
    outcome = attempt(ctx, lambda: ctx.world.store.delete_run(run_id), f"delete({run_id!r})")
    outcome.extra["run_id"] = run_id
    return outcome


def update_delete(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    run_id = outcome.extra["run_id"]
    expect(outcome, None, f"delete({run_id!r})")
    ctx.model.deleted(run_id)
    ctx.objects.pop(run_id, None)


# -- two saves at one moment (group commit joins them on SQLite) ----------------------------


def act_save_together(ctx: Context, args: dict[str, Any]) -> Outcome:
    now = time.time()
    runs = [rid for rid in ctx.run_ids() + ctx.free_ids() if not ctx.model.live_lease(rid, now)]
    first = _pick(runs, args["run"])
    second = _pick([rid for rid in runs if rid != first], args["other"])
    planned = []
    for run_id, change in ((first, args["change"]), (second, args["other_change"])):
        run = ctx.model.runs.get(run_id)
        base = None if run is None else run.checkpoints[run.head]
        step = 0 if run is None else run.head + 1
        content = content_of(change, ctx.model.chain_version, base)
        ctx.remember(content)
        planned.append((run_id, step, content, build(run_id, step, content)))
    results: dict[str, Outcome] = {}
    start = threading.Barrier(2)

    def save(run_id: str, cp: Any) -> None:
        start.wait()
        results[run_id] = attempt(ctx, lambda: ctx.world.store.save(cp), f"save together({run_id!r})")

    threads = [threading.Thread(target=save, args=(run_id, cp)) for run_id, _, _, cp in planned]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Outcome(extra={"planned": planned, "results": results})


def update_save_together(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    for run_id, step, content, cp in outcome.extra["planned"]:
        result = outcome.extra["results"].get(run_id)
        if result is None:  # the thread's attempt raised a finding: it is in the thread's report
            raise Finding(f"save together({run_id!r}) did not finish with an outcome")
        result.extra.update(run_id=run_id, step=step, content=content, cp=cp)
        update_save(ctx, args, result)
