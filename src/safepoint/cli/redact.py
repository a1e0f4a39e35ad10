"""``safepoint redact``: take a value found too late out of everything a store holds."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click
from rich.progress import Progress

from safepoint.cli.output import ID_LEN, console, emit, handle_errors, open_store_at, say, store_options
from safepoint.errors import InvalidArgument
from safepoint.scrub import Secrets
from safepoint.store import Redacted, Redaction
from safepoint.visible import visible

_DOING = "redacting runs"


@click.command()
@store_options
@click.option(
    "--secret-env",
    "secret_envs",
    multiple=True,
    metavar="NAME",
    help="A secret to take out, read from the environment variable NAME: it becomes a reference "
    "to NAME, resolved on load like a secret registered at save (repeatable).",
)
@click.option(
    "--value-env",
    "value_envs",
    multiple=True,
    metavar="NAME",
    help="A literal value to take out for good, read from the environment variable NAME "
    "(repeatable): it becomes [REDACTED:value-N].",
)
@click.option(
    "--value-file",
    "value_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Literal values to take out for good, one per line (repeatable).",
)
@click.option("--rule", "rules", multiple=True, metavar="NAME", help="A scrubber rule to apply (repeatable).")
@click.option("--all-rules", is_flag=True, help="Apply every token rule of the scrubber.")
@click.option("--pii", "pii", multiple=True, metavar="KIND", help="A PII kind to redact: email, phone, ...")
@click.option("--run", "run_ids", multiple=True, metavar="RUN_ID", help="Only this run and its forks.")
@click.option("--label", "labels", multiple=True, metavar="NAME=VALUE", help="Only runs with this label.")
@click.option("--dry-run", is_flag=True, help="Count what would change, per rule and per run; write nothing.")
@handle_errors
def redact(
    *,
    store_url: str,
    as_json: bool,
    secret_envs: tuple[str, ...],
    value_envs: tuple[str, ...],
    value_files: tuple[Path, ...],
    rules: tuple[str, ...],
    all_rules: bool,
    pii: tuple[str, ...],
    run_ids: tuple[str, ...],
    labels: tuple[str, ...],
    dry_run: bool,
) -> None:
    """Rewrite every stored checkpoint, message, journal entry and blob that holds a value
    found too late — a secret registered now, a token a rule learned since, a customer's
    data under a deletion request — as a save with that value known would have written it.

    One run per transaction (writers of other runs carry on); each redacted run gets an
    audit record that show and verify display. Killed, run it again to finish. Values are
    never given on the command line (they would stay in the shell's history): they come
    from the environment or a file. Exits 1 when a run could not be redacted.
    """
    if run_ids and labels:
        raise click.UsageError("choose runs by --run or by --label, not both")
    secrets = Secrets()
    for name in secret_envs:
        secrets.add_env(name)
    values = [_env(name) for name in value_envs]
    for path in value_files:
        values += [line for line in path.read_text(encoding="utf-8").splitlines() if line]
    redaction = Redaction(
        secrets=secrets if secret_envs else None,
        values=values,
        rules=True if all_rules else rules,
        pii=pii,
    )
    wanted = dict(_label(text) for text in labels) if labels else None
    with (
        open_store_at(store_url, read_only=dry_run) as store,
        Progress(console=console, disable=as_json) as bar,
    ):
        task = bar.add_task(_DOING, total=None)
        done = store.redact(
            redaction,
            run_ids=list(run_ids) if run_ids else None,
            labels=wanted,
            dry_run=dry_run,
            progress=lambda index, total: bar.update(task, completed=index, total=total),
        )
    emit(_as_json(done, redaction), as_json, lambda: _render(done, redaction))
    if done.failed:
        sys.exit(1)


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise InvalidArgument(f"environment variable {name!r} is not set")
    return value


def _label(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise InvalidArgument("--label takes NAME=VALUE")
    return name, value


def _as_json(done: Redacted, redaction: Redaction) -> dict[str, Any]:
    # A run id that holds a value cannot be rewritten; it is named with the value masked.
    named = redaction.masked
    return {
        "redaction_id": done.redaction_id,
        "dry_run": done.dry_run,
        "runs_scanned": done.runs_scanned,
        "runs_changed": len([run for run in done.runs if run.found]),
        "found": dict(done.counts),
        "runs": [
            {
                "run_id": named(run.run_id),
                "found": dict(run.counts),
                "steps": {str(step): count for step, count in sorted(run.steps.items())},
                "rows": run.rows,
                "calls": run.calls,
                "blobs_new": run.blobs_new,
                "left": dict(run.left),
            }
            for run in done.runs
        ],
        "forks": [named(fork) for fork in done.forks],
        "left": dict(done.left),
        "blobs_deleted": done.blobs_deleted,
        "failed": [{"run_id": named(run_id), "error": type(exc).__name__} for run_id, exc in done.failed],
    }


def _render(done: Redacted, redaction: Redaction) -> None:
    named = redaction.masked
    doing = "would replace" if done.dry_run else "replaced"
    changed = [run for run in done.runs if run.found]
    say(f"{doing} {sum(done.counts.values())} values in {len(changed)} of {done.runs_scanned} runs")
    for rule, count in sorted(done.counts.items()):
        say(f"  {visible(rule)}: {count}")
    for run in changed:
        steps = ", ".join(str(step) for step in sorted(run.steps)) or "-"
        say(
            f"  run {visible(named(run.run_id), max_len=ID_LEN)}: {run.found} in steps {steps}"
            f" ({run.rows} rows, {run.calls} recorded calls, {run.blobs_new} new blobs)"
        )
    if done.forks:
        forks = ", ".join(visible(named(fork), max_len=ID_LEN) for fork in done.forks)
        say(f"forks of the chosen runs, redacted too: {forks}")
    for where, count in sorted(done.left.items()):
        say(f"left as it is (cannot be rewritten): {count} in a {where}; see docs/secrets.md")
    if not done.dry_run and done.blobs_deleted:
        say(f"deleted {done.blobs_deleted} blobs that held a value")
    for run_id, exc in done.failed:
        shown = visible(named(run_id), max_len=ID_LEN)
        say(f"  not redacted: run {shown} ({type(exc).__name__}); safepoint verify names it")
