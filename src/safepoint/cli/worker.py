"""``safepoint worker module:function``: a ``Worker`` process running the given handler.

The handler is imported as ``python -m`` would find it: the current folder
first on ``sys.path``, then the installed packages. It is called with each
claimed run's ``Job`` (see ``safepoint.worker``). A handler that cannot be
imported (no such module, an error while importing it, no such function,
not callable) is one line on stderr and exit 2, before the store is opened.

SIGTERM and SIGINT drain (``Worker.install_signal_handlers``, as
docs/operations.md says): the handler sees ``job.stopping``, finishes its
step and returns, the run goes back to the queue with its attempt
uncounted, and the command exits 0.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from safepoint.cli.gc import parse_duration
from safepoint.cli.output import emit, handle_errors, open_existing, say, store_options
from safepoint.store.admin import scheme_of
from safepoint.visible import visible
from safepoint.worker import Worker


@click.command()
@store_options
@click.argument("handler_spec", metavar="MODULE:FUNCTION")
@click.option("--worker-id", default=None, metavar="ID", help="The worker's id (default: host:pid).")
@click.option("--lease", default="30s", show_default=True, metavar="DURATION", help="Lease per claim.")
@click.option("--poll", default="0.5s", show_default=True, metavar="DURATION", help="Wait when idle.")
@click.option("--max-attempts", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--max-runs", type=click.IntRange(min=1), default=None, help="Stop after this many runs.")
@click.option("--stop-when-idle", is_flag=True, help="Exit once nothing is left to claim (a batch job).")
@click.option(
    "--pgbouncer",
    is_flag=True,
    help="PostgreSQL through PgBouncer in transaction mode: no prepared statements.",
)
@click.option(
    "--serve",
    "serve",
    multiple=True,
    metavar="TENANT[=WEIGHT]",
    help="Serve this tenant (repeat for each; claims go round by weight). Default: the store's own.",
)
@click.option(
    "--tenant-limit",
    type=click.IntRange(min=1),
    default=None,
    help="At most this many runs of one tenant leased at once, by every worker together.",
)
@handle_errors
def worker(
    *,
    store_url: str,
    as_json: bool,
    handler_spec: str,
    worker_id: str | None,
    lease: str,
    poll: str,
    max_attempts: int,
    max_runs: int | None,
    stop_when_idle: bool,
    pgbouncer: bool,
    serve: tuple[str, ...],
    tenant_limit: int | None,
) -> None:
    """Run a worker: claim queued runs and hand each to MODULE:FUNCTION (a handler taking a Job).

    MODULE is imported from the current folder as python -m would. SIGTERM
    (or Ctrl-C) drains: the current step finishes, its run goes back to the
    queue, and the worker exits 0. With --serve it serves those tenants,
    claiming from each in turn (docs/tenants.md, "The fair queue").
    """
    handler = _imported(handler_spec)
    lease_for = _seconds(lease, "lease")
    poll_every = _seconds(poll, "poll")
    options: dict[str, Any] = {}
    if pgbouncer:
        if scheme_of(store_url) != "postgresql":
            raise click.UsageError("--pgbouncer is for PostgreSQL stores")
        options["prepare_threshold"] = None
    if not as_json:  # what the worker does, one line each, on stderr (its log names runs escaped)
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    with open_existing(store_url, **options) as store:
        working = Worker(
            store,
            handler,
            worker_id=worker_id,
            lease=lease_for,
            poll=poll_every,
            max_attempts=max_attempts,
            tenants=_served(serve) if serve else None,
            tenant_limit=tenant_limit,
        )
        working.install_signal_handlers()
        if not as_json:
            say(f"worker {visible(working.worker_id)} serving {visible(handler_spec)}")
        handled = working.run(max_runs=max_runs, stop_when_idle=stop_when_idle)
    data = {"worker_id": working.worker_id, "handler": handler_spec, "handled": handled}
    runs = f"{handled} run" + ("" if handled == 1 else "s")
    emit(data, as_json, lambda: say(f"worker {visible(working.worker_id)} stopped: {runs} handled"))


def _served(given: tuple[str, ...]) -> dict[str, int]:
    """``--serve a --serve b=3``: each tenant and its weight (1 unless given)."""
    served: dict[str, int] = {}
    for item in given:
        name, sep, weight = item.partition("=")
        if sep and not weight.isdigit():
            raise click.BadParameter("takes TENANT or TENANT=WEIGHT (a whole number)", param_hint="--serve")
        served[name] = int(weight) if sep else 1
    return served


def _seconds(text: str, name: str) -> float:
    duration = parse_duration(text, name)
    seconds = 0.0 if duration is None else duration.total_seconds()
    if seconds <= 0:
        raise click.BadParameter("must be a positive duration (30s, 5m)", param_hint=f"--{name}")
    return seconds


def _imported(spec: str) -> Callable[..., Any]:
    """The handler ``module:function`` names, imported as ``python -m`` would; a failure is a usage error."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise click.BadParameter(
            "takes MODULE:FUNCTION (my_agent.handlers:handle)", param_hint="MODULE:FUNCTION"
        )
    # python -m puts the current folder first; a console script puts its own bin folder there instead.
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any error of the user's module while importing: one line, not its traceback
        raise click.UsageError(
            f"cannot import {visible(module_name, max_len=100)}: {type(exc).__name__}: "
            f"{visible(str(exc), max_len=200)}"
        ) from None
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise click.UsageError(
                f"{visible(module_name, max_len=100)} has no {visible(attribute, max_len=100)}"
            )
    if not callable(target):
        raise click.UsageError(f"{visible(spec, max_len=200)} is not callable")
    return target  # type: ignore[no-any-return]
