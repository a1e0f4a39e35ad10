"""``safepoint migrate``, ``check``, ``export`` and ``import``: the schema-change commands.

They need the application's migration chain, named as ``module:attribute``
with ``--migrations`` (or ``SAFEPOINT_MIGRATIONS``), e.g.
``--migrations myapp.checkpoints:CHAIN``; the attribute is a
``MigrationChain`` or a function returning one. The current directory is
importable, as with ``python -m``. See docs/migrations.md for the workflow.
"""

from __future__ import annotations

import importlib
import os
import random
import sys
from pathlib import Path
from typing import Any

import click
from rich.progress import Progress

from safepoint.cli.output import (
    ID_LEN,
    console,
    emit,
    given_keyring,
    handle_errors,
    open_store_at,
    say,
    store_options,
)
from safepoint.errors import Conflict, InvalidArgument, NotEncrypted, NotFound, SafepointError
from safepoint.fixtures import fixture_text, read_fixture_run
from safepoint.migration_check import CheckReport, check_one, stored_keys
from safepoint.migrations import MigrationChain
from safepoint.store.admin import migrate_store
from safepoint.visible import visible, visible_json


def load_chain(spec: str | None) -> MigrationChain:
    """The chain named by ``module:attribute``; ``InvalidArgument`` saying what is wrong."""
    if not spec:
        raise InvalidArgument(
            "name the migration chain with --migrations module:attribute (or SAFEPOINT_MIGRATIONS)"
        )
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise InvalidArgument(f"--migrations {spec!r} must look like module:attribute")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    # Importing the application's module must not leave a __pycache__ in its
    # folder: check is a read command, and read commands change nothing.
    sys.dont_write_bytecode = True
    try:
        value: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise InvalidArgument(f"cannot load migration chain {spec!r}: {exc}") from exc
    if callable(value) and not isinstance(value, MigrationChain):
        value = value()
    if not isinstance(value, MigrationChain):
        raise InvalidArgument(f"{spec!r} is a {type(value).__name__}, not a safepoint.MigrationChain")
    return value


def migrations_option(func: Any) -> Any:
    return click.option(
        "--migrations",
        "chain_spec",
        envvar="SAFEPOINT_MIGRATIONS",
        metavar="MODULE:ATTR",
        help="The application's MigrationChain (env SAFEPOINT_MIGRATIONS).",
    )(func)


@click.command()
@store_options
@migrations_option
@click.option("--dry-run", is_flag=True, help="Load and migrate in memory only; write nothing.")
@click.option("--batch-size", default=50, show_default=True, help="Runs per transaction.")
@handle_errors
def migrate(*, store_url: str, as_json: bool, chain_spec: str | None, dry_run: bool, batch_size: int) -> None:
    """Rewrite every run's latest checkpoint at the chain's current schema_version.

    Resumable: run it again after an interruption and it finishes the runs
    still behind. History checkpoints are migrated when they are read.
    """
    chain = load_chain(chain_spec)
    with (
        open_store_at(store_url, migrations=chain) as store,
        Progress(console=console, disable=as_json) as bar,
    ):
        task = bar.add_task("migrating runs" if not dry_run else "checking runs (dry run)", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)
            if as_json:
                return
            # One plain line per batch as well: logs and tests can follow progress.
            bar.console.print(f"batch done: {done}/{total}")

        report = migrate_store(store, batch_size=batch_size, dry_run=dry_run, progress=progress)
    data = {
        "runs": report.runs,
        "behind": report.behind,
        "migrated": report.migrated,
        "dry_run": report.dry_run,
        "current_version": chain.current,
        "failures": [{"run_id": r, "step": s, "error": str(e)} for r, s, e in report.failures],
    }

    def render() -> None:
        verb = "would migrate" if dry_run else "migrated"
        say(
            f"{report.runs} runs, {report.behind} behind version {chain.current}: {verb} {report.migrated}, "
            f"{len(report.failures)} failed"
        )
        for run_id, step, error in report.failures:
            where = f"run {visible(run_id, max_len=ID_LEN)} step {step}"
            say(f"  {where}: {type(error).__name__}: {visible(str(error))}")

    emit(data, as_json, render)
    if not report.ok:
        sys.exit(1)


@click.command()
@store_options
@migrations_option
@click.option("--sample", type=int, default=None, help="Check a random sample of this many checkpoints.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for --sample.")
@handle_errors
def check(*, store_url: str, as_json: bool, chain_spec: str | None, sample: int | None, seed: int) -> None:
    """Pre-deploy check: load and migrate every stored checkpoint with this code, writing nothing.

    Exits non-zero if any checkpoint fails, listing each with run, step and error.
    """
    report = CheckReport()
    # The store first: where there is none, the application's code is never imported.
    with open_store_at(store_url, read_only=True) as store:
        chain = load_chain(chain_spec)
        chain.validate()
        keys = list(stored_keys(store))
        if sample is not None and sample < len(keys):
            keys = [keys[i] for i in sorted(random.Random(seed).sample(range(len(keys)), max(sample, 0)))]
        with Progress(console=console, disable=as_json) as bar:
            for run_id, step in bar.track(keys, description="checking checkpoints"):
                try:
                    data = store.load(run_id, step, migrate=False).to_dict()
                except NotFound:
                    continue
                except SafepointError as exc:
                    report.checked += 1
                    report.fail(run_id, step, exc)
                    continue
                check_one(report, chain, run_id, step, data)
    data = {
        "checked": report.checked,
        "up_to_date": report.up_to_date,
        "migrated": report.migrated,
        "versions": {str(k): v for k, v in sorted(report.versions.items())},
        "failures": [
            {"run_id": f.run_id, "step": f.step, "error": type(f.error).__name__, "message": str(f.error)}
            for f in report.failures
        ],
    }
    emit(data, as_json, lambda: _render_check(report))
    if not report.ok:
        sys.exit(1)


def _render_check(report: CheckReport) -> None:
    # The summary's first line holds only counts; each failure after it quotes
    # a run id and an error text, so those are shown one line each, escaped.
    say(report.summary().partition("\n")[0])
    for failure in report.failures:
        say(f"  {visible(str(failure))}")


@click.command()
@store_options
@click.argument("run_id")
@click.option("--step", type=int, default=None, help="The step to export (default: the latest).")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here, not stdout."
)
@click.option(
    "--encrypt",
    is_flag=True,
    help="Seal the fixture under the keyring's writing key (--key-file or SAFEPOINT_KEYS).",
)
@handle_errors
def export(
    *, store_url: str, as_json: bool, run_id: str, step: int | None, output: Path | None, encrypt: bool
) -> None:
    """Write one stored checkpoint as a fixture file (as stored: not migrated, secrets as references),
    with the run's recorded calls up to the step after it.

    Capture one before changing your schema; test the migration against it
    with ``safepoint.testing.assert_migrates``. With ``--encrypt`` the file
    holds only sealed bytes and key ids; ``safepoint import`` opens it with
    the same keyring.
    """
    del as_json  # a fixture is JSON already
    keyring = given_keyring()
    if encrypt and keyring is None:
        raise InvalidArgument("--encrypt needs a keyring: --key-file, SAFEPOINT_KEY_FILE or SAFEPOINT_KEYS")
    try:
        store = open_store_at(store_url, read_only=True)
    except NotEncrypted:  # a plaintext store, its fixture sealed under the keyring given
        store = open_store_at(store_url, read_only=True, encryption=None)
    with store:
        cp = store.load(run_id, step, migrate=False)
        calls = store.export_calls(run_id, step=cp.step)  # the recorded calls that travel with it
        text = fixture_text(cp, calls=calls, encryption=keyring if encrypt else None)
    if output is None:
        # Equal JSON with no control character raw: stdout is often a terminal.
        click.echo(visible_json(text), nl=False)
    else:
        output.write_text(text, encoding="utf-8")  # the file holds the fixture exactly as written
        click.echo(f"wrote {visible(str(output))}", err=True)


@click.command(name="import")
@store_options
@click.argument("fixture", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--run-id", default=None, help="The new run's id (default: the exported run's id).")
@migrations_option
@click.option(
    "--schema-version",
    type=int,
    default=None,
    help="The current schema_version of the code that will resume it (default: the chain's, else 1).",
)
@handle_errors
def import_(
    *,
    store_url: str,
    as_json: bool,
    fixture: Path,
    run_id: str | None,
    chain_spec: str | None,
    schema_version: int | None,
) -> None:
    """Start a new run from an exported checkpoint (``safepoint export``), as its step 0, with
    the recorded calls that travel with it (those after the checkpoint as its step 1's).

    Reproduce a production run locally: export it there, import it here, resume it.
    A fixture newer than schema_version 1 needs the chain it was written for
    (``--migrations``) or ``--schema-version``.
    """
    cp, calls = read_fixture_run(fixture, run_id, encryption=given_keyring())
    options: dict[str, Any] = {"schema_version": schema_version}
    if chain_spec:
        options["migrations"] = load_chain(chain_spec)
    try:
        store = open_store_at(store_url, **options)
    except NotEncrypted:  # a sealed fixture into a plaintext store: the keyring opened the file only
        store = open_store_at(store_url, encryption=None, **options)
    with store:
        try:
            info = store.save(cp)
        except Conflict as exc:
            if exc.head is None:
                raise
            raise Conflict(
                cp.run_id,
                cp.step,
                exc.head,
                detail=f"run {cp.run_id!r} already exists (at step {exc.head}); "
                "import the fixture as a new run with --run-id NEW_ID",
            ) from None
        imported = store.import_calls(cp.run_id, calls) if calls else 0
    emit(
        {
            "run_id": info.run_id,
            "step": info.step,
            "messages": info.message_count,
            "digest": info.digest,
            "calls": imported,
        },
        as_json,
        lambda: say(
            f"imported {visible(str(fixture))} as run {visible(info.run_id, max_len=ID_LEN)} step 0"
            + (f" with {imported} recorded calls" if imported else "")
        ),
    )
