"""Operations on the call journal as stored: ``verify_calls``, and export with import.

``verify_calls`` on a store nothing damaged reports no damage and checks as many entries as
the model holds (``NotFound`` for a run that is not there). ``export_import`` does what
``safepoint export`` and ``safepoint import`` do: a checkpoint of a run (any kept step) and
the entries that travel with it (``export_calls``) as a fixture's text — sealed under the
store's keyring now and then — read back (``read_fixture_run``) and imported into a fresh
store of the same settings, where the run's step 0 must load as the model's checkpoint and
its journal must be the model's entries up to the step after the exported one, at their new
steps (those the checkpoint covers at 0, the ones after it at 1), in the same order, with no
writer; each request digest carried where the source store can give it back (a sealed one
cannot: the copy is never replayed); and ``verify_calls`` there reports nothing.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from safepoint import NotFound
from safepoint.fixtures import fixture_text, read_fixture_run

from .configurations import Config
from .context import Context, Finding, Outcome, attempt, difference, expect, observed
from .invariants import search_world
from .model import Call
from .ops_checkpoints import _pick
from .ops_journal import _check_entry, run_or_free
from .world import World

# -- verify_calls -------------------------------------------------------------------------------


def verify_args(config: Config) -> st.SearchStrategy[dict[str, Any]]:
    del config
    return st.fixed_dictionaries({"run": st.integers(0, 9)})  # 8 and 9: a free id now and then


def act_verify_calls(ctx: Context, args: dict[str, Any]) -> Outcome:
    run_id = run_or_free(ctx, args["run"])
    what = f"verify_calls({run_id!r})"
    outcome = attempt(ctx, lambda: ctx.world.store.verify_calls(run_id), what)
    outcome.extra.update(run_id=run_id, what=what)
    return outcome


def update_verify_calls(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    run_id, what = outcome.extra["run_id"], outcome.extra["what"]
    run = ctx.model.runs.get(run_id)
    expect(outcome, None if run is not None else NotFound, what)
    if run is None:
        return
    _undamaged(outcome.value, len(run.calls), what)


def _undamaged(verified: Any, entries: int, what: str) -> None:
    if verified.damaged:
        named = sorted({type(exc).__name__ for exc in verified.damaged})
        damaged = f"{len(verified.damaged)} damaged ({', '.join(named)})"
        raise Finding(f"{what}: {damaged} on a store nothing damaged")
    if verified.checked != entries:
        raise Finding(f"{what}: checked {verified.checked} entries; the model holds {entries}")


# -- export and import ------------------------------------------------------------------------


def export_args(config: Config) -> st.SearchStrategy[dict[str, Any]]:
    del config
    return st.fixed_dictionaries({"run": st.integers(0, 7), "step": st.integers(0, 7), "seal": st.booleans()})


def act_export_import(ctx: Context, args: dict[str, Any]) -> Outcome:
    run_id = _pick(ctx.run_ids(), args["run"])
    steps = sorted(ctx.model.runs[run_id].checkpoints)
    step = steps[args["step"] % len(steps)]
    source = ctx.world.store
    keyring = ctx.world.keyring if args["seal"] else None  # export --encrypt, on an encrypted store
    path = ctx.world.folder / f"fixture-{ctx.steps}.json"

    def export() -> None:
        cp = source.load(run_id, step, migrate=False)
        path.write_text(fixture_text(cp, calls=source.export_calls(run_id, step=cp.step), encryption=keyring))

    outcome = attempt(ctx, export, f"export({run_id!r}, {step})")
    outcome.extra.update(run_id=run_id, step=step)
    if outcome.error is not None:
        return outcome
    target = World(ctx.world.config)  # a fresh store of the same settings, its own keyring
    try:
        if ctx.model.chain_version != 1:  # the code that resumes it knows the same chain
            target.reopen(ctx.model.chain_version)
        outcome.extra.update(_import(ctx, target, path, keyring, run_id))
    finally:
        target.close()
    return outcome


def _import(ctx: Context, target: World, path: Any, keyring: Any, run_id: str) -> dict[str, Outcome]:
    """Import the fixture into ``target`` and read back what the update checks (before it closes)."""
    store, resolve = target.store, ctx.model.policy == "reference"
    found: dict[str, Outcome] = {}

    def start() -> int:
        cp, calls = read_fixture_run(path, encryption=keyring)
        store.save(cp)
        return store.import_calls(cp.run_id, calls) if calls else 0

    found["imported"] = attempt(ctx, start, f"import({run_id!r})")
    if found["imported"].error is not None:
        return found
    found["loaded"] = attempt(ctx, lambda: store.load(run_id, 0, resolve_secrets=resolve), "load imported")
    found["listed"] = attempt(
        ctx, lambda: store.recorded_calls(run_id, resolve_secrets=resolve), "recorded_calls imported"
    )
    found["verified"] = attempt(ctx, lambda: store.verify_calls(run_id), "verify_calls imported")
    if found["listed"].error is None:  # each entry read by its key with its first request
        calls = ctx.model.runs[run_id].calls
        found["same"] = attempt(
            ctx,
            lambda: [
                store.recorded_call(run_id, entry.key, request=calls[entry.key].request).same_request
                for entry in found["listed"].value
                if entry.key in calls
            ],
            "recorded_call imported",
        )
    search_world(ctx, target)  # no registered secret (nor, sealed, a canary) in its files
    return found


def update_export_import(ctx: Context, args: dict[str, Any], outcome: Outcome) -> None:
    run_id, step = outcome.extra["run_id"], outcome.extra["step"]
    what = f"export({run_id!r}, {step}) and import into a fresh store"
    expect(outcome, None, f"export({run_id!r}, {step})")
    for name in ("imported", "loaded", "listed", "verified", "same"):
        expect(outcome.extra[name], None, f"{what}: {name}")
    model = ctx.model
    content = model.runs[run_id].checkpoints[step]
    want_cp = model.expected(content)
    want_cp["labels"] = {**want_cp["labels"], "imported_from": f"{run_id}@{step}"}
    got_cp = observed(outcome.extra["loaded"].value)
    if got_cp != want_cp:
        raise Finding(f"{what}: its step 0 differs from the model: {difference(got_cp, want_cp)}")
    # The entries that travel: up to the step after the exported one, steps counted from it.
    travel = [(key, call) for key, call in model.entries(run_id) if call.step <= step + 1]
    moved = [(key, _moved(call, step)) for key, call in travel]
    want = sorted(moved, key=lambda item: item[1].step)  # the store's order: by step, then as written
    if outcome.extra["imported"].value != len(want):
        wrote = outcome.extra["imported"].value
        raise Finding(f"{what}: import wrote {wrote} entries; the model carries {len(want)}")
    got = outcome.extra["listed"].value
    if [entry.key for entry in got] != [key for key, _ in want]:
        shown = f"{len(got)} entries imported; the model carries {len(want)}"
        raise Finding(f"{what}: {shown} (or other keys, or in another order)")
    for entry, (_, call) in zip(got, want, strict=True):
        _check_entry(ctx, entry, call, what, resolved=True)
    _undamaged(outcome.extra["verified"].value, len(want), f"{what}: verify_calls")
    # A known request is carried and matches; a sealed store's is not, and never matches.
    known = not model.encrypted
    same = [None if call.request is None else known for _, call in want]
    if outcome.extra["same"].value != same:
        raise Finding(f"{what}: same_request is {outcome.extra['same'].value}; the model says {same}")


def _moved(call: Call, exported: int) -> Call:
    """The entry as the import writes it: at its step counted from the exported checkpoint's,
    with no writer (an import writes under no lease); a result redacted after it was recorded
    travels redacted, and says so."""
    step = max(0, call.step - exported)
    return Call(call.state, step, call.result, call.request, call.usage, redacted_later=call.redacted_later)
