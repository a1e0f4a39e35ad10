"""Operations on the work queue: enqueue, claim (a live or a stale lease), heartbeat, release,
a save under a lease, and a worker on the old migration chain with a claim budget."""

from __future__ import annotations

import time
from typing import Any

from safepoint import LeaseLost, Status, Worker
from safepoint.worker import Job

from . import model as reference
from .context import Context, Finding, Outcome, attempt, build, content_of, expect
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
    lease = ctx.leases[args["lease"] % len(ctx.leases)]
    outcome = attempt(
        ctx,
        lambda: ctx.world.store.release(lease, status=args["status"], requeue=args["requeue"]),
        f"release({lease.run_id!r})",
    )
    outcome.extra["lease"] = lease
    return outcome


def update_release(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    lease = outcome.extra["lease"]
    current = _current(ctx, lease)
    expect(outcome, None if current else LeaseLost, f"release({lease.run_id!r})")
    if current:
        run = ctx.model.runs[lease.run_id]
        run.lease = None
        run.queued = args["requeue"]
        if args["status"] is not None:
            run.status = args["status"]


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
