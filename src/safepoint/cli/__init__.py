"""The ``safepoint`` command: a thin layer over the public API.

Every command takes ``--store URL`` (or the ``SAFEPOINT_STORE`` environment
variable; default ``sqlite:///.safepoint/state.db``) and ``--json``; output
goes through ``output.emit``: tables for people, JSON for machines. Errors print one
line to stderr (a JSON object with ``--json``) and exit with the status for
their kind (``output.handle_errors``, ``output.ExitCode``). Whatever comes from a
store is shown through ``safepoint.cli.output``: control characters visible, never markup.

This module is the group and the list of its commands; each subject's
commands are in their own module (``runs``, ``inspect``, ``verify``, ``gc``, ``backup``,
``migrations``, ``operate``, ``keys``, ``demo``), which knows nothing of the group.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from safepoint.cli import (
    backup,
    demo,
    fork,
    gc,
    inspect,
    keys,
    migrations,
    operate,
    redact,
    runs,
    stats,
    tenants,
    ui,
    verify,
    watch,
    worker,
)
from safepoint.cli.output import error_object
from safepoint.cli.stores import tenant_option
from safepoint.visible import visible

__all__ = ["main"]


class _Commands(click.Group):
    """The command group; a usage error quoting the command line shows it with control characters escaped.

    Click prints some arguments raw (``Got unexpected extra argument (…)``),
    and a run id pasted from a store can hold escape sequences. With
    ``--json`` on the command line, a usage error is a JSON object too.
    """

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:
            raise _visible_usage(exc, "--json" in args) from None
        ctx.meta[_WANTS_JSON] = "--json" in args
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:  # a subcommand's own arguments are parsed here
            raise _visible_usage(exc, ctx.meta.get(_WANTS_JSON, False)) from None


_WANTS_JSON = "safepoint.json"  # on the group's context: --json was on the command line


def _visible_usage(exc: click.ClickException, as_json: bool = False) -> click.ClickException:
    """``exc`` itself when its text is plain; else the same kind of error (and exit code) with it escaped.

    With ``as_json`` it is printed here as a JSON object and the command exits
    with its code (2 for a usage error).
    """
    message = exc.format_message()
    if as_json:
        click.echo(error_object(message, type(exc).__name__), err=True)
        sys.exit(exc.exit_code)
    if visible(message) == message:
        return exc
    if isinstance(exc, click.UsageError):
        return click.UsageError(visible(message), exc.ctx)
    return click.ClickException(visible(message))


@click.group(cls=_Commands)
@click.version_option(package_name="safepoint")
@tenant_option
def main() -> None:
    """safepoint: checkpoints that make AI-agent runs survivable."""


for _command in (
    runs.runs,
    inspect.show,
    inspect.history,
    inspect.diff,
    verify.verify,
    gc.gc,
    backup.backup,
    migrations.migrate,
    migrations.check,
    migrations.export,
    migrations.import_,
    operate.answer,
    operate.cancel,
    operate.requeue,
    operate.delete,
    operate.budget,
    fork.fork,
    watch.watch,
    stats.stats,
    worker.worker,
    keys.encrypt,
    keys.rekey,
    redact.redact,
    tenants.tenant,
    ui.ui,
    demo.demo,
):
    main.add_command(_command)
