"""Operations on the work queue: enqueue, claim (a live or a stale lease), heartbeat, release
(with what a worker records: attempts, retry_at, an error text), the queue's reads
(claimable_in, queue_too_new), a save under a lease, and a worker on the old migration chain
with a claim budget."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from safepoint import InvalidArgument, LeaseLost, Status, Worker
from safepoint.worker import Job

from . import model as reference
from .context import Context, Finding, Outcome, attempt, build, content_of, expect
from .model import SECRET_VALUE
from .ops_checkpoints import _pick

LIVE_LEASE = 3600.0  # outlives any example
STALE_LEASE = 0.05  # expired before the next step: the machine waits it out
CLAIM_SLACK = 3  # claims a worker may make beyond the runs the model lets it take: its budget


def act_enqueue(ctx: Context, args: dict[str, Any]) -> Outcome:
    run_id = _pick(ctx.run_ids(), args["run"])
    outcome = attempt(ctx, lambda: ctx.world.store.enqueue(run_id), f"enqueue({run_id!r})")
    outcome.extra["run_id"] = run_id
    return outcome


def update_enqueue(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    expect(outcome, None, f"enqueue({outcome.extra['run_id']!r})")
    ctx.model.runs[outcome.extra["run_id"]].queued = True


def act_claim(ctx: Context, args: dict[str, Any]) -> Outcome:
    seconds = LIVE_LEASE if args["live"] else STALE_LEASE
    owner = f"machine-{len(ctx.leases)}"
    claimable = ctx.model.claimable(time.time())
    outcome = attempt(ctx, lambda: ctx.world.store.claim(owner, lease=seconds), "claim")
    if outcome.value is not None and not args["live"]:
        while time.time() <= outcome.value.expires_at.timestamp():
            time.sleep(STALE_LEASE / 2)  # a stale lease is one whose expiry has passed
    outcome.extra["claimable"] = claimable
    return outcome


def update_claim(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    expect(outcome, None, "claim")
    lease, claimable = outcome.value, outcome.extra["claimable"]
    if lease is None:
        if claimable:
            raise Finding(f"claim found nothing; the model has {sorted(claimable)} claimable")
        return
    if lease.run_id not in claimable:
        raise Finding(f"claim took {lease.run_id!r}, not one of the claimable {sorted(claimable)}")
    ctx.leases.append(lease)
    ctx.model.runs[lease.run_id].lease = reference.Lease(
        lease.worker_id, lease.epoch, lease.expires_at.timestamp()
    )


def _current(ctx: Context, lease: Any) -> bool:
    """Whether ``lease`` is still the run's lease: its owner and epoch (expired or not)."""
    run = ctx.model.runs.get(lease.run_id)
    held = None if run is None else run.lease
    return held is not None and (held.owner, held.epoch) == (lease.worker_id, lease.epoch)


def act_heartbeat(ctx: Context, args: dict[str, Any]) -> Outcome:
    index = args["lease"] % len(ctx.leases)
    lease = ctx.leases[index]
    outcome = attempt(ctx, lambda: ctx.world.store.heartbeat(lease), f"heartbeat({lease.run_id!r})")
    renewed = outcome.value
    if renewed is not None and renewed.expires_at.timestamp() - time.time() < LIVE_LEASE / 2:
        # A stale lease renewed for its own short period: waited out as a claim's is, so the
        # next step never races its expiry (found by make soak: a worker took the run mid-poll).
        while time.time() <= renewed.expires_at.timestamp():
            time.sleep(STALE_LEASE / 2)
    outcome.extra.update(index=index, lease=lease)
    return outcome


def update_heartbeat(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    lease = outcome.extra["lease"]
    current = _current(ctx, lease)
    expect(outcome, None if current else LeaseLost, f"heartbeat({lease.run_id!r})")
    if current:
        ctx.leases[outcome.extra["index"]] = outcome.value
        held = ctx.model.runs[lease.run_id].lease
        assert held is not None
        held.expires_at = outcome.value.expires_at.timestamp()


def act_release(ctx: Context, args: dict[str, Any]) -> Outcome:
    """A release as a worker makes it: what happens to the attempts, a ``retry_at`` (None, or one
    already come, so the queue the model predicts is unchanged) and an error text that may carry
    the registered secret (the store scrubs it)."""
    lease = ctx.leases[args["lease"] % len(ctx.leases)]
    retry_at = None if not args["retry"] else datetime.now(UTC) - timedelta(seconds=1)
    error = None if args["error"] is None else args["error"].replace("{secret}", SECRET_VALUE)
    outcome = attempt(
        ctx,
        lambda: ctx.world.store.release(
            lease,
            status=args["status"],
            requeue=args["requeue"],
            attempts=args["attempts"],
            retry_at=retry_at,
            error=error,
        ),
        f"release({lease.run_id!r})",
    )
    outcome.extra["lease"] = lease
    return outcome


def update_release(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    lease = outcome.extra["lease"]
    what = f"release({lease.run_id!r})"
    if args["error"] is not None and args["attempts"] == "reset":
        expect(outcome, InvalidArgument, what)  # a clean outcome carries no error
        return
    current = _current(ctx, lease)
    expect(outcome, None if current else LeaseLost, what)
    if current and args["error"] is not None:
        recorded = ctx.world.store.run(lease.run_id).last_error
        if recorded is None or SECRET_VALUE in recorded:
            raise Finding(f"{what}: the last error is missing or holds the registered secret")
    if current:
        run = ctx.model.runs[lease.run_id]
        run.lease = None
        run.queued = args["requeue"]
        if args["status"] is not None:
            run.status = args["status"]


def act_queue_reads(ctx: Context, args: dict[str, Any]) -> Outcome:
    store = ctx.world.store
    return attempt(ctx, lambda: (store.claimable_in(), store.queue_too_new()), "queue reads")


def update_queue_reads(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    """``queue_too_new`` counts the queued runs whose head is newer than the store's version,
    exactly; ``claimable_in`` is 0 while the model has a claimable run this store may take, and
    None when nothing is queued (a lease expiring meanwhile only makes it smaller)."""
    expect(outcome, None, "queue reads")
    wait, too_new = outcome.value
    version = ctx.world.store.settings.schema_version
    queued = [run for run in ctx.model.runs.values() if run.queued]
    newer = sum(1 for run in queued if run.checkpoints[run.head]["schema_version"] > version)
    if too_new != newer:
        raise Finding(f"queue_too_new() is {too_new}, the model counts {newer}")
    takes = [
        run_id
        for run_id in ctx.model.claimable(time.time())
        if ctx.model.runs[run_id].checkpoints[ctx.model.runs[run_id].head]["schema_version"] <= version
    ]
    if takes and wait != timedelta(0):
        raise Finding(f"claimable_in() is {wait} while the model has a claimable run")
    if not queued and wait is not None:
        raise Finding(f"claimable_in() is {wait} with nothing queued")


def act_save_under_lease(ctx: Context, args: dict[str, Any]) -> Outcome:
    lease = ctx.leases[args["lease"] % len(ctx.leases)]
    run = ctx.model.runs[lease.run_id]
    step = run.head + 1
    content = content_of(args["change"], ctx.model.chain_version, run.checkpoints[run.head])
    ctx.remember(content)
    cp = build(lease.run_id, step, content)
    outcome = attempt(
        ctx, lambda: ctx.world.store.save(cp, lease=lease), f"save under lease({lease.run_id!r})"
    )
    outcome.extra.update(run_id=lease.run_id, step=step, content=content, cp=cp, lease=lease)
    return outcome


def update_save_under_lease(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    if not _current(ctx, outcome.extra["lease"]):
        expect(outcome, LeaseLost, f"save under a lease no longer current({outcome.extra['run_id']!r})")
        return
    expect(outcome, None, f"save under lease({outcome.extra['run_id']!r})")
    ctx.model.saved(outcome.extra["run_id"], outcome.extra["step"], outcome.extra["content"])
    ctx.objects.pop(outcome.extra["run_id"], None)


# -- a worker deployed with the old chain ------------------------------------------------


def handler(job: Job) -> Status:
    """One step of work: the head's next step with a counter moved, saved under the lease; done."""
    cp = job.checkpoint.next()
    cp.counters = {**cp.counters, "worked": int(cp.counters.get("worked", 0)) + 1}
    job.save(cp)
    return Status.DONE


def _takes(ctx: Context) -> list[str]:
    """The runs a worker on the old chain takes: claimable, and not newer than its chain."""
    return sorted(
        run_id
        for run_id in ctx.model.claimable(time.time())
        if ctx.model.runs[run_id].checkpoints[ctx.model.runs[run_id].head]["schema_version"]
        <= reference.WORKER_VERSION
    )


def act_old_worker(ctx: Context, args: dict[str, Any]) -> Outcome:
    takes = _takes(ctx)
    budget = len(takes) + CLAIM_SLACK

    def work() -> int:
        store = ctx.world.open(chain_version=reference.WORKER_VERSION)
        try:
            worker = Worker(store, handler, worker_id="old-worker", lease=5.0, poll=0.01, backoff=0.01)
            return worker.run(max_runs=budget, stop_when_idle=True)
        finally:
            store.close()

    outcome = attempt(ctx, work, "an old worker's run(stop_when_idle=True)")
    outcome.extra.update(takes=takes, budget=budget)
    return outcome


def update_old_worker(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    expect(outcome, None, "an old worker's run(stop_when_idle=True)")
    takes, budget = outcome.extra["takes"], outcome.extra["budget"]
    if outcome.value >= budget:
        raise Finding(
            f"a worker on schema_version {reference.WORKER_VERSION} used its whole claim budget "
            f"({budget} claims) where the model lets it take {len(takes)} runs: it claims again and again"
        )
    if outcome.value != len(takes):
        raise Finding(f"an old worker handled {outcome.value} runs; the model lets it take {takes}")
    for run_id in takes:
        run = ctx.model.runs[run_id]
        content = dict(run.checkpoints[run.head])
        content["counters"] = {**content["counters"], "worked": int(content["counters"].get("worked", 0)) + 1}
        ctx.model.saved(run_id, run.head + 1, content)
        run.status, run.queued, run.lease = "done", False, None
        ctx.objects.pop(run_id, None)
