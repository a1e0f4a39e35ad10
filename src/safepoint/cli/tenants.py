"""``safepoint tenant``: a store's tenants as a whole — ``tenant list`` shows them all (the
operator view: ``store/tenant_listing.py``), ``tenant erase NAME`` deletes one.

``erase`` is ``safepoint.store.admin.erase_tenant`` (``store/erasing.py``): the
tenant's data keys first (on an encrypted tenant nothing of it opens from
then on), then its runs, blobs and meta; on SQLite its file and blob folder.
Killed, run it again to finish. It opens nothing sealed, so it needs no
keyring: ``--key-file`` is accepted (every store command takes it) and unused.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from safepoint.cli.output import emit, handle_errors, open_store_at, place_options, say, store_options
from safepoint.store.admin import (
    Erasure,
    erase_tenant,
    tenant_held,
    tenant_summaries,
)
from safepoint.visible import visible

_TENANT = "safepoint.tenant"  # where store_options leaves --tenant on the click context
TENANT_ENV = "SAFEPOINT_TENANT"


@click.group()
def tenant() -> None:
    """A store's tenants: list them all (an operator's role), erase one with everything it holds."""


@tenant.command(name="list")
@store_options
@handle_errors
def list_tenants(*, store_url: str, as_json: bool) -> None:
    """Every tenant of the store, with its runs by status (read-only).

    The operator view across tenants: on PostgreSQL it needs a role that
    passes row-level security (BYPASSRLS; docs/tenants.md, "The operator
    view"), and the application's role is refused. A tenant encrypted under
    keys not given here is listed as sealed.
    """
    store = open_store_at(store_url, read_only=True)
    try:
        summaries = list(tenant_summaries(store))
    finally:
        store.close()
    rows = [
        {
            "tenant": summary.tenant,
            "sealed": summary.sealed,
            "runs": None if summary.counts is None else dict(summary.counts.by_status),
            "queued": None if summary.counts is None else summary.counts.queued,
            "leased": None if summary.counts is None else summary.counts.leased,
        }
        for summary in summaries
    ]
    emit({"tenants": rows}, as_json, lambda: _render_tenants(rows))


def _render_tenants(rows: list[dict[str, Any]]) -> None:
    if not rows:
        say("no tenants: the store holds no runs")
        return
    for row in rows:
        if row["sealed"]:
            say(f"{row['tenant']}: sealed (encrypted under keys not given here)")
            continue
        runs = ", ".join(f"{count} {status}" for status, count in sorted(row["runs"].items())) or "no runs"
        say(f"{row['tenant']}: {runs}; {row['queued']} queued, {row['leased']} leased")


@tenant.command()
@store_options
@click.argument("name")
@click.option("--yes", is_flag=True, help="Erase without asking.")
@handle_errors
def erase(*, store_url: str, as_json: bool, name: str, yes: bool) -> None:
    """Erase the tenant NAME: its data keys first, then its runs, blobs and meta.

    On an encrypted tenant nothing of it opens once its data keys are gone
    (the first step); destroy its keyring too, and no backup taken before
    opens either. Resumable: killed, run it again. Asks first unless --yes.
    On SQLite the tenant's file and blob folder are removed; the implicit
    tenant (default) is the store's own file and is refused there.
    """
    options = place_options(store_url)
    # The tenant other commands work on (--tenant, SAFEPOINT_TENANT) must not be another one:
    # an erase of NAME run in a shell set up for another tenant is more likely a slip than meant.
    current = click.get_current_context().meta.get(_TENANT) or os.environ.get(TENANT_ENV) or None
    if current is not None and current != name:
        raise click.UsageError(
            f"--tenant or {TENANT_ENV} names another tenant than the one to erase: give one, or the same"
        )
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("not erasing without a confirmation: pass --yes")
        held = tenant_held(store_url, name, **options)
        click.confirm(
            f"Erase tenant {visible(name)} for good: {held.runs} runs, {held.checkpoints} checkpoints,"
            f" {held.blobs} blob rows, {held.data_keys} data keys?",
            abort=True,
            err=True,
        )
    report = erase_tenant(store_url, name, **options)
    emit(report.as_json(), as_json, lambda: _render(report))


def _render(report: Erasure) -> None:
    name = visible(report.tenant)
    if not report.found:
        say(f"tenant {name} holds nothing: erased already, or never used")
        return
    keys = f"{report.data_keys} data keys (its sealed values open nowhere now), " if report.encrypted else ""
    objects = f", {report.blob_objects} blob objects" if report.blob_objects else ""
    files = f"; removed {len(report.files)} files and folders" if report.files else ""
    say(f"erased tenant {name}: {keys}{report.runs} runs, {report.blob_rows} blob rows{objects}{files}")
