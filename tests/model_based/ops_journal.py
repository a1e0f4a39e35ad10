"""Operations on the call journal: record a result, write an intent, read an entry back.

Each draws a run (a free id now and then: ``NotFound``, or None for a read), a key (hostile
ones, and a key no backend can store: ``InvalidArgument``), a request and, for a write, the
lease to write under (none, or one the machine claimed: current, stale or of a run deleted
since). The model predicts the outcome from its runs' leases and its entries — put if
absent, the first result wins, an entry belongs to the step after the head and a result
keeps its intent's step — and the update checks the entry the store handed back exactly.
``invariants.check_calls`` then compares every changed run's whole journal with the model.
"""

from __future__ import annotations

import time
from typing import Any

from hypothesis import strategies as st

from safepoint import InvalidArgument, LeaseLost, NotFound, RunHeld
from safepoint.journal import CallUsage, Recorded

from .configurations import Config
from .context import Context, Finding, Outcome, attempt, expect
from .model import Call
from .ops_checkpoints import _pick
from .values import leaves, values

KEYS = (
    "model#1",
    "tool:pay|call_7",
    'it\'s "quoted" `twice`',
    "é💥\u202e\u2028",
    "$secret",
    "[SECRET:TOKEN]",
    "k" * 1024,
    "",  # refused: a key is 1 to 1024 characters, no NUL
    "nul\x00key",  # refused
)
GOOD_KEYS = len(KEYS) - 2  # the last two are refused


def _keys() -> st.SearchStrategy[int]:
    """A key's index: a refused key one draw in four."""
    good = st.integers(0, GOOD_KEYS - 1)
    return good | good | good | st.integers(GOOD_KEYS, len(KEYS) - 1)


REQUESTS = (None, {"q": 1}, {"q": 2}, {"messages": [{"role": "user", "content": "$x \x00 é"}]})
USAGES = (None, (10, 2, 0.5), (0, 0, 0.0))


def args_of(config: Config) -> st.SearchStrategy[dict[str, Any]]:
    """A write's draw: where, what, under which lease (an index into the machine's leases)."""
    allow_bytes = config.blobs != "inline"  # with no blob target the store refuses bytes
    return st.fixed_dictionaries(
        {
            "run": st.integers(0, 9),  # past the model's runs now and then: a free id
            "key": _keys(),
            "existing": st.booleans(),  # an entry the model holds, when it holds one: first wins
            "request": st.integers(0, len(REQUESTS) - 1),
            "lease": st.none() | st.integers(0, 7),
            "result": st.one_of(values(allow_bytes), leaves(allow_bytes)),
            "usage": st.integers(0, len(USAGES) - 1),
        }
    )


def read_args(config: Config) -> st.SearchStrategy[dict[str, Any]]:
    del config
    return st.fixed_dictionaries(
        {
            "run": st.integers(0, 9),
            "key": _keys(),
            "existing": st.booleans(),
            "request": st.integers(0, 3),
        }
    )


def _where(ctx: Context, args: dict[str, Any]) -> tuple[str, str, Any]:
    """The run, key and lease a call goes to: an entry the model holds (when drawn and there is
    one), else the lease's run (with the lease), else a drawn run — or a free id now and then."""
    lease = None
    if args.get("lease") is not None and ctx.leases:
        lease = ctx.leases[args["lease"] % len(ctx.leases)]
    held = sorted((run_id, key) for run_id, run in ctx.model.runs.items() for key in run.calls)
    if lease is not None:
        held = [(run_id, key) for run_id, key in held if run_id == lease.run_id]
    if args["existing"] and held:
        run_id, key = held[(args["run"] + args["key"]) % len(held)]
        return run_id, key, lease
    key = KEYS[args["key"]]
    if lease is not None:
        return lease.run_id, key, lease
    free = ctx.free_ids()
    if args["run"] >= 8 and free:  # now and then a run that is not there
        return free[args["run"] % len(free)], key, None
    return _pick(ctx.run_ids() or free, args["run"]), key, None


# -- record_call and call_intent -------------------------------------------------------------


def act_write(ctx: Context, args: dict[str, Any], *, intent: bool) -> Outcome:
    run_id, key, lease = _where(ctx, args)
    request = REQUESTS[args["request"]]
    result = args["result"] if not intent else None
    drawn = USAGES[args.get("usage", 0)]
    usage = None if drawn is None or intent else CallUsage(*drawn)
    ctx.remember(result)
    store = ctx.world.store
    what = f"{'call_intent' if intent else 'record_call'}({run_id!r}, a key of {len(key)} characters)"
    if intent:
        outcome = attempt(ctx, lambda: store.call_intent(run_id, key, request=request, lease=lease), what)
    else:
        call = lambda: store.record_call(run_id, key, result, request=request, usage=usage, lease=lease)  # noqa: E731
        outcome = attempt(ctx, call, what)
    outcome.extra.update(run_id=run_id, key=key, lease=lease, result=result, usage=drawn, what=what)
    return outcome


def act_record_call(ctx: Context, args: dict[str, Any]) -> Outcome:
    return act_write(ctx, args, intent=False)


def act_call_intent(ctx: Context, args: dict[str, Any]) -> Outcome:
    return act_write(ctx, args, intent=True)


def _predicted_error(ctx: Context, run_id: str, key: str, lease: Any) -> type | None:
    if not key or "\x00" in key:
        return InvalidArgument
    run = ctx.model.runs.get(run_id)
    if run is None:
        return NotFound
    if lease is not None:
        held = run.lease
        current = held is not None and (held.owner, held.epoch) == (lease.worker_id, lease.epoch)
        return None if current else LeaseLost
    return RunHeld if ctx.model.live_lease(run_id, time.time()) else None


def update_write(ctx: Context, args: dict[str, Any], outcome: Outcome, *, intent: bool) -> None:
    extra = outcome.extra
    run_id, key, lease, what = extra["run_id"], extra["key"], extra["lease"], extra["what"]
    error = _predicted_error(ctx, run_id, key, lease)
    expect(outcome, error, what)
    if error is not None:
        return
    run = ctx.model.runs[run_id]
    found = run.calls.get(key)
    if found is None or (not intent and found.state == "intent"):
        step = run.head + 1 if found is None else found.step
        writer = None if lease is None else lease.worker_id
        epoch = None if lease is None else lease.epoch
        if found is not None:  # the intent's row, completed: it keeps its writer and request
            request, writer, epoch = found.request, found.writer, found.epoch
        else:
            request = REQUESTS[args["request"]]
        state = "intent" if intent else "done"
        usage = None if intent else extra["usage"]
        run.calls[key] = Call(state, step, extra["result"], request, usage, writer, epoch)
        written = True
    else:
        written = False  # put if absent: the entry stands as its first writer left it
    entry = outcome.value
    if entry.written is not written:
        raise Finding(f"{what}: written is {entry.written}; the model says {written}")
    _check_entry(ctx, entry, run.calls[key], what)


def update_record_call(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    update_write(ctx, args, outcome, intent=False)


def update_call_intent(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    update_write(ctx, args, outcome, intent=True)


def _check_entry(ctx: Context, entry: Recorded, call: Call, what: str, *, resolved: bool = False) -> None:
    """The entry as the store gave it, against the model's (the result only when it was read
    with secrets resolved, or holds no secret: a write hands back references unresolved)."""
    usage = (
        None if entry.usage is None else (entry.usage.tokens_in, entry.usage.tokens_out, entry.usage.spend)
    )
    got = (entry.state, entry.step, entry.writer, entry.epoch, usage)
    want = (call.state, call.step, call.writer, call.epoch, call.usage)
    if got != want:
        raise Finding(f"{what}: (state, step, writer, epoch, usage) is {got}; the model has {want}")
    if resolved or ctx.model.policy == "redact" or not _holds_secret(call.result):
        expected = ctx.model.expected_result(call.result)
        if entry.result != expected:
            raise Finding(f"{what}: the result differs from the model's (the first one recorded)")
    redacting = (ctx.model.policy == "redact" and _holds_secret(call.result)) or call.redacted_later
    if (entry.redacted > 0) is not redacting:
        raise Finding(f"{what}: redacted is {entry.redacted}; the model expects {'some' if redacting else 0}")


def _holds_secret(value: Any) -> bool:
    from .model import SECRET_VALUE  # noqa: PLC0415

    if isinstance(value, str):
        return SECRET_VALUE in value
    if isinstance(value, dict):
        return any(_holds_secret(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_secret(item) for item in value)
    return False


# -- recorded_call ----------------------------------------------------------------------------


def act_recorded_call(ctx: Context, args: dict[str, Any]) -> Outcome:
    run_id, key, _ = _where(ctx, {**args, "lease": None})
    request = REQUESTS[args["request"]]
    resolve = ctx.model.policy == "reference"
    what = f"recorded_call({run_id!r}, a key of {len(key)} characters)"
    outcome = attempt(
        ctx,
        lambda: ctx.world.store.recorded_call(run_id, key, request=request, resolve_secrets=resolve),
        what,
    )
    outcome.extra.update(run_id=run_id, key=key, request=request, what=what)
    return outcome


def update_recorded_call(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    extra = outcome.extra
    run_id, key, request, what = extra["run_id"], extra["key"], extra["request"], extra["what"]
    if not key or "\x00" in key:
        expect(outcome, InvalidArgument, what)
        return
    expect(outcome, None, what)
    run = ctx.model.runs.get(run_id)
    call = None if run is None else run.calls.get(key)
    if call is None:
        if outcome.value is not None:
            raise Finding(f"{what}: the store has an entry the model does not")
        return
    if outcome.value is None:
        raise Finding(f"{what}: the entry the model holds is missing")
    _check_entry(ctx, outcome.value, call, what, resolved=True)
    same = None if request is None or call.request is None else request == call.request
    if outcome.value.same_request is not same:
        raise Finding(f"{what}: same_request is {outcome.value.same_request}; the model says {same}")


# -- recorded_calls ---------------------------------------------------------------------------


def list_args(config: Config) -> st.SearchStrategy[dict[str, Any]]:
    del config
    return st.fixed_dictionaries(
        {
            "run": st.integers(0, 9),  # 8 and 9: a free id now and then (NotFound)
            "step": st.none() | st.integers(-1, 9),  # -1: refused; past the candidates: a bare step
            "resolve": st.booleans(),
        }
    )


def run_or_free(ctx: Context, index: int) -> str:
    """A run the model holds — or, for an index of 8 or 9, a free id when there is one."""
    free = ctx.free_ids()
    return free[index % len(free)] if index >= 8 and free else _pick(ctx.run_ids(), index)


def act_recorded_calls(ctx: Context, args: dict[str, Any]) -> Outcome:
    run_id = run_or_free(ctx, args["run"])
    step, run = args["step"], ctx.model.runs.get(run_id)
    if step is not None and step >= 0 and run is not None and step < 8:
        # A step that holds entries, a checkpoint's, or the open one (head + 1) — or a bare one.
        steps = {call.step for call in run.calls.values()} | set(run.checkpoints) | {run.head + 1}
        step = sorted(steps)[step % len(steps)]
    resolve = args["resolve"] and ctx.model.policy == "reference"
    what = f"recorded_calls({run_id!r}, step={step})"
    store = ctx.world.store
    outcome = attempt(ctx, lambda: store.recorded_calls(run_id, step=step, resolve_secrets=resolve), what)
    outcome.extra.update(run_id=run_id, step=step, resolve=resolve, what=what)
    return outcome


def update_recorded_calls(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    """The listing is the model's entries of that step (or all), exactly and in the store's order."""
    extra = outcome.extra
    run_id, step, what = extra["run_id"], extra["step"], extra["what"]
    if step is not None and step < 0:
        expect(outcome, InvalidArgument, what)
        return
    if run_id not in ctx.model.runs:
        expect(outcome, NotFound, what)
        return
    expect(outcome, None, what)
    want = ctx.model.entries(run_id, step)
    got = outcome.value
    if [entry.key for entry in got] != [key for key, _ in want]:
        keys = sorted(entry.key for entry in got)
        if keys == sorted(key for key, _ in want):
            raise Finding(f"{what}: the model's entries, in another order")
        raise Finding(f"{what}: {len(got)} entries; the model has {len(want)} (or other keys)")
    for entry, (_, call) in zip(got, want, strict=True):
        if entry.run_id != run_id:
            raise Finding(f"{what}: an entry names run {entry.run_id!r}")
        _check_entry(ctx, entry, call, what, resolved=extra["resolve"])
