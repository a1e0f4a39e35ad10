"""``safepoint ui``: serve the inspector (safepoint.ui) over a store, until Ctrl-C."""

from __future__ import annotations

import contextlib
import secrets
import socket

import click

from safepoint.cli.output import handle_errors, open_existing, open_store_at, say, store_options
from safepoint.errors import InvalidArgument, MissingExtra
from safepoint.store.admin import IMPLICIT_TENANT, tenants_of
from safepoint.ui.guard import LOOPBACK


@click.command()
@store_options
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Interface to bind (loopback needs no token)."
)
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True)
@click.option(
    "--token", default=None, help="The token other interfaces need (default: one is made and printed)."
)
@click.option(
    "--allow-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Another name this server answers to.",
)
@click.option(
    "--allow-actions",
    is_flag=True,
    help="Answer, cancel and requeue from the page (opens the store for writing).",
)
@click.option(
    "--all-tenants",
    is_flag=True,
    help="The operator's overview of every tenant (read-only; PostgreSQL: a role with BYPASSRLS).",
)
@handle_errors
def ui(
    *,
    store_url: str,
    as_json: bool,
    host: str,
    port: int,
    token: str | None,
    allowed_hosts: tuple[str, ...],
    allow_actions: bool,
    all_tenants: bool,
) -> None:
    """Look at your runs in a browser: runs, a run's timeline, a step's conversation, diffs, verify.

    Binds to 127.0.0.1 unless --host says otherwise; on any other interface
    every request needs the token (printed with the address, traded for a
    cookie on first use). Read-only unless --allow-actions. With --tenant it
    shows that tenant's runs only, and its header names the tenant.
    """
    del as_json  # the page is the output
    if all_tenants and allow_actions:
        raise click.UsageError("--all-tenants is a read-only overview: look at a tenant with --tenant to act")
    try:
        import uvicorn  # noqa: PLC0415

        from safepoint.ui import create_app  # noqa: PLC0415
    except ImportError as exc:
        raise MissingExtra("the inspector (safepoint ui)", "ui", exc.name or "uvicorn") from exc
    if token is not None and len(token) < 16:
        raise InvalidArgument("--token must be at least 16 characters")
    if host not in LOOPBACK and token is None:
        token = secrets.token_urlsafe(24)
    if host in ("0.0.0.0", "::"):  # every interface: this machine's own names and addresses
        allowed_hosts = (*allowed_hosts, *_own_names())
    store = open_existing(store_url) if allow_actions else open_store_at(store_url, read_only=True)
    if all_tenants:
        tenants_of(store)  # the role must see every tenant: refused here, before the server starts
    app = create_app(
        store,
        host=host,
        port=port,
        token=token,
        allowed_hosts=allowed_hosts,
        allow_actions=allow_actions,
        all_tenants=all_tenants,
    )
    shown_host = f"[{host}]" if ":" in host else host
    address = f"http://{shown_host}:{port}/" + (f"?token={token}" if token else "")
    mode = "actions allowed" if allow_actions else "read-only"
    if all_tenants:
        mode = "all tenants, read-only"
    if store.tenant != IMPLICIT_TENANT:  # a checked name: nothing to escape
        mode = f"tenant {store.tenant}, {mode}"
    say(f"safepoint ui on {address} ({mode}); Ctrl-C stops it")
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False, proxy_headers=False)
    finally:
        store.close()


def _own_names() -> tuple[str, ...]:
    """The names and addresses this machine answers to (a wildcard bind's Host allowlist)."""
    names = {socket.gethostname(), socket.getfqdn(), "localhost", "127.0.0.1", "::1"}
    with contextlib.suppress(OSError):  # no resolvable name: its own name and loopback still serve
        names |= {str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)}
    return tuple(sorted(names))
