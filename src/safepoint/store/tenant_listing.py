"""The operator view: every tenant of a store, for a role that may see them all (docs/tenants.md).

A handle sees one tenant. Listing them all is an operator's act, and the
database decides whether it is allowed: on PostgreSQL the role must pass
row-level security (a role with BYPASSRLS — the operator role of the role
layout — or a superuser); the application's role cannot, and asking with it
raises ``InvalidArgument`` rather than listing its own tenant as if it were
all. There is no wildcard tenant: each tenant is then read through a handle
of its own (``Store.for_tenant``), read-only when the operator's is. On
SQLite the tenants are the files beside the store's (``tenants.tenant_path``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from safepoint.errors import EncryptedStore, InvalidArgument, InvalidURL, MissingKey
from safepoint.records import RunCounts

from .facade import Store
from .query import UNSUPPORTED, Op, Query
from .tenants import IMPLICIT, check_tenant, tenant_path
from .urls import sqlite_path

_ROLE = (
    "listing every tenant needs a PostgreSQL role that passes row-level security: the operator "
    "role with BYPASSRLS (docs/tenants.md, 'The operator view'); this role sees one tenant at a time"
)


@dataclass(frozen=True, slots=True)
class TenantSummary:
    """One tenant as the operator view shows it: its runs by status, or ``sealed`` when the
    tenant is encrypted under keys the operator was not given."""

    tenant: str
    counts: RunCounts | None
    sealed: bool = False


def tenants_of(store: Store) -> list[str]:
    """Every tenant ``store`` holds runs or keys of, sorted; ``InvalidArgument`` for a role that
    row-level security binds."""
    names = store.driver.run(_tenant_names(), write=False)
    if names is None:
        names = _tenant_files(store)
    return sorted(name for name in names if _is_name(name))


def _is_name(name: str) -> bool:
    """Whether ``name`` is a tenant's (a stray file in the tenants' folder is not one)."""
    try:
        check_tenant(name)
    except InvalidURL:
        return False
    return True


def tenant_summaries(store: Store) -> Iterator[TenantSummary]:
    """Each tenant's run counts, read through a handle of its own (closed after)."""
    for tenant in tenants_of(store):
        try:
            handle = store if tenant == store.tenant else store.for_tenant(tenant)
        except (EncryptedStore, MissingKey):
            yield TenantSummary(tenant, None, sealed=True)
            continue
        try:
            yield TenantSummary(tenant, handle.run_counts())
        finally:
            if handle is not store:
                handle.close()


def _tenant_names() -> Op[list[str] | None]:
    rows = yield Query("sees_every_tenant", optional=True)
    if rows is UNSUPPORTED:
        return None
    if not rows or not rows[0].sees:
        raise InvalidArgument(_ROLE)
    return [row.tenant for row in (yield Query("tenant_names", optional=True))]


def _tenant_files(store: Store) -> list[str]:
    """SQLite: the implicit tenant's file and each tenant's beside it (memory://: its one tenant)."""
    if not store.url.startswith("sqlite:"):
        return [store.tenant]
    path = sqlite_path(store.url)
    names = [IMPLICIT] if os.path.exists(path) else []
    folder = os.path.dirname(tenant_path(path, "x"))
    if os.path.isdir(folder):
        names += [name[:-3] for name in os.listdir(folder) if name.endswith(".db")]
    return names
