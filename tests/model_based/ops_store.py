"""Operations on the store as a whole and on other processes: reopen, a schema bump, encrypt,
rekey, a SIGKILLed writer, a process without the keyring, a process with a wrong key."""

from __future__ import annotations

import json
import os
import signal
import time
import traceback
from pathlib import Path
from typing import Any

from safepoint import EncryptedStore, InvalidKey, Keyring
from safepoint.store.keys import encrypt_store, rekey_store

from . import child
from .context import Context, Finding, Outcome, attempt, build, content_of, expect
from .model import Call
from .ops_checkpoints import _pick
from .world import new_key


def act_reopen(ctx: Context, args: dict[str, Any]) -> Outcome:
    return attempt(ctx, lambda: ctx.world.reopen(ctx.model.chain_version), "reopen")


def update_reopen(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    expect(outcome, None, "reopen")


def act_schema_bump(ctx: Context, args: dict[str, Any]) -> Outcome:
    return attempt(ctx, lambda: ctx.world.reopen(ctx.model.chain_version + 1), "open with a newer chain")


def update_schema_bump(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    expect(outcome, None, "open with a newer chain")
    ctx.model.chain_version += 1


def act_encrypt(ctx: Context, args: dict[str, Any]) -> Outcome:
    text = f"index:{new_key()} k1:{new_key()}"

    def convert() -> None:
        encrypt_store(ctx.world.store, Keyring.from_text(text))
        ctx.world.keyring_text = text
        ctx.world.reopen(ctx.model.chain_version)

    return attempt(ctx, convert, "encrypt")


def update_encrypt(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    expect(outcome, None, "encrypt")
    ctx.model.encrypted = True


def act_rekey(ctx: Context, args: dict[str, Any]) -> Outcome:
    assert ctx.world.keyring_text is not None
    text = f"{ctx.world.keyring_text} k{ctx.steps + 2}:{new_key()}"  # the new last key writes

    def rotate() -> None:
        ctx.world.keyring_text = text
        ctx.world.reopen(ctx.model.chain_version)
        rekey_store(ctx.world.store)

    return attempt(ctx, rotate, "rekey")


def update_rekey(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    expect(outcome, None, "rekey")


# -- a writer SIGKILLed mid-saves -----------------------------------------------------------


def act_sigkill_writer(ctx: Context, args: dict[str, Any]) -> Outcome:
    run_id = _pick(ctx.free_ids(), args["run"])
    contents, base = [], None
    for change in args["changes"]:
        base = content_of(change, ctx.model.chain_version, base)
        contents.append(base)
        ctx.remember(base)
    folder = ctx.world.folder
    ledger = folder / f"ledger-{ctx.steps}.txt"
    # The child records a call after each save: its result is the step's message (hostile text).
    results = [
        {"step": step, "said": content["messages"][-1]["content"]} for step, content in enumerate(contents)
    ]
    spec = {
        "store": ctx.world.spec(ctx.model.chain_version),
        "run_id": run_id,
        "steps": contents,
        "results": results,
        "ledger": str(ledger),
    }
    spec_path = folder / f"child-{ctx.steps}.json"
    spec_path.write_text(json.dumps(spec))
    # A forked child: a real process (SIGKILLed below) that starts in milliseconds, where a new
    # interpreter importing safepoint took seconds a step. It opens the store afresh (child.main).
    errors = folder / f"child-{ctx.steps}.err"
    pid = os.fork()
    if pid == 0:  # the child: save until killed, never return into the test
        code = 0
        try:
            child.main(str(spec_path))
        except BaseException:
            errors.write_text(traceback.format_exc())
            code = 1
        os._exit(code)
    kill_after = args["kill_after"] % len(contents)  # acknowledged saves to wait for before the kill
    deadline = time.monotonic() + 60
    status = 0
    while _acknowledged(ledger) < kill_after and time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.002)
    else:
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0:
        raise Finding(f"the child writer failed before its kill: {errors.read_text()[-2000:]}")
    acked = _acknowledged(ledger)
    outcome = attempt(ctx, lambda: ctx.world.reopen(ctx.model.chain_version), "reopen after SIGKILL")
    if outcome.error is None:
        found = attempt(
            ctx, lambda: [i.step for i in ctx.world.store.history(run_id)], f"history({run_id!r})"
        )
        outcome.extra["found"] = found
        if found.error is None:
            keys = attempt(
                ctx, lambda: [e.key for e in ctx.world.store.recorded_calls(run_id)], "recorded_calls"
            )
            outcome.extra["entries"] = keys
    outcome.extra.update(run_id=run_id, contents=contents, acked=acked, results=results)
    return outcome


def _acknowledged(ledger: Path) -> int:
    try:
        return len(ledger.read_text().splitlines())
    except FileNotFoundError:
        return 0


def update_sigkill_writer(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    expect(outcome, None, "reopen after SIGKILL")
    run_id, contents, acked = outcome.extra["run_id"], outcome.extra["contents"], outcome.extra["acked"]
    found = outcome.extra["found"]
    if acked == 0 and found.error is not None:
        return  # nothing acknowledged and no run: the kill came before the first commit
    expect(found, None, f"history({run_id!r}) after SIGKILL")
    steps = found.value
    # Every acknowledged save is there; at most the one in flight beyond them.
    if steps[:acked] != list(range(acked)) or len(steps) > acked + 1 or steps != list(range(len(steps))):
        raise Finding(f"after SIGKILL {run_id!r} holds steps {steps}; {acked} were acknowledged")
    for step in steps:
        ctx.model.saved(run_id, step, contents[step])
    # Each acknowledged step's entry is there; the step in flight's may be (only if it saved).
    entries = outcome.extra["entries"]
    expect(entries, None, f"recorded_calls({run_id!r}) after SIGKILL")
    found_keys = sorted(entries.value)
    sure = [f"child#{step}" for step in range(acked)]
    maybe = [f"child#{acked}"] if len(steps) > acked else []
    if not set(sure) <= set(found_keys) or not set(found_keys) <= set(sure + maybe):
        raise Finding(f"after SIGKILL {run_id!r} holds entries {found_keys}; {acked} steps were acknowledged")
    run = ctx.model.runs[run_id]
    for key in found_keys:
        step = int(key.split("#")[1])
        run.calls[key] = Call("done", step + 1, outcome.extra["results"][step])


# -- other processes: without the keyring, with a wrong key -----------------------------------


def _refused_at_open(ctx: Context, outcome: Outcome, error: type, who: str) -> None:
    """An encrypted store refuses ``who`` at open with ``error``, and nothing is written."""
    if outcome.error is not None:
        expect(outcome, error, f"open by {who}")
        return
    saved = outcome.extra.get("saved")
    did = "its save was acknowledged" if saved is not None and saved.error is None else "it opened"
    raise Finding(f"an encrypted store opened by {who} did not raise {error.__name__} at open: {did}")


def _open_and_save(ctx: Context, args: dict[str, Any], keyring: Any, who: str) -> Outcome:
    run_id = _pick(ctx.free_ids(), args["run"])
    content = content_of(args["change"], ctx.model.chain_version, None)
    ctx.remember(content)
    outcome = attempt(
        ctx, lambda: ctx.world.open(chain_version=ctx.model.chain_version, keyring=keyring), who
    )
    if outcome.error is None:
        other = outcome.value
        try:
            outcome.extra["saved"] = attempt(
                ctx, lambda: other.save(build(run_id, 0, content)), f"save by {who}"
            )
        finally:
            other.close()
    outcome.extra.update(run_id=run_id, content=content)
    return outcome


def act_open_without_keyring(ctx: Context, args: dict[str, Any]) -> Outcome:
    return _open_and_save(ctx, args, False, "a process without the keyring")


def update_open_without_keyring(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    who = "a process without the keyring"
    if ctx.model.encrypted:
        _refused_at_open(ctx, outcome, EncryptedStore, who)
        return
    expect(outcome, None, f"open by {who}")
    expect(outcome.extra["saved"], None, f"save by {who}")
    ctx.model.saved(outcome.extra["run_id"], 0, outcome.extra["content"])


def act_open_with_wrong_key(ctx: Context, args: dict[str, Any]) -> Outcome:
    assert ctx.world.keyring_text is not None
    entries = ctx.world.keyring_text.split()
    if args["index"]:  # the right key-encryption keys, a wrong index key
        entries = [f"index:{new_key()}" if e.startswith("index:") else e for e in entries]
    else:  # the writing key's id with other bytes
        entries[-1] = f"{entries[-1].split(':')[0]}:{new_key()}"
    return _open_and_save(ctx, args, Keyring.from_text(" ".join(entries)), "a process with a wrong key")


def update_open_with_wrong_key(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    _refused_at_open(ctx, outcome, InvalidKey, "a process with a wrong key")
