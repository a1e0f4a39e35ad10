"""``safepoint verify``: every stored checkpoint loaded and checked, and each run's row against them."""

from __future__ import annotations

import sys

import click
from rich.progress import Progress

from safepoint.cli.output import ID_LEN, console, emit, handle_errors, open_store_at, say, store_options
from safepoint.store.admin import verify_store
from safepoint.visible import visible

_DOING = "verifying checkpoints"


@click.command()
@store_options
@click.argument("run_id", required=False)
@handle_errors
def verify(*, store_url: str, as_json: bool, run_id: str | None) -> None:
    """Load and verify every checkpoint (of one run, or all): digests, messages, blobs,
    the listed columns outside the digest, each run's head, and its recorded calls.

    Exits non-zero if any fails, naming run, step and what is wrong.
    """
    with open_store_at(store_url, read_only=True) as store, Progress(console=console, disable=as_json) as bar:
        report = verify_store(store, run_id, track=lambda keys: bar.track(keys, description=_DOING))
    checked, calls, failures = report.checked, report.calls, report.failures
    redactions = report.redactions
    data = {"checked": checked, "calls": calls, "failures": failures, "redactions": redactions}

    def render() -> None:
        say(f"verified {checked} checkpoints and {calls} recorded calls: {len(failures)} failed")
        for failure in failures:
            say(f"  {failure['error']}: {visible(failure['message'])}")
        if redactions:
            # A rewritten history that is audited, not an accidental edit (docs/secrets.md).
            say(f"{len(redactions)} audited redactions (the one sanctioned rewrite of stored history):")
            for done in redactions:
                steps = ", ".join(map(str, done["steps"])) or "none"
                say(
                    f"  run {visible(done['run_id'], max_len=ID_LEN)}: {done['found']} values replaced"
                    f" in steps {steps} at {done['at']} (redaction {done['redaction_id']})"
                )

    emit(data, as_json, render)
    if failures:
        sys.exit(1)
