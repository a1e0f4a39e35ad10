"""Tenants: whose runs a store handle sees — the ``tenant=`` option and its names.

A store holds the runs of one or many tenants (the customers an agent
platform serves). A handle is opened for one of them (``open_store(url,
tenant="acme")``) and sees, writes, claims and collects only that tenant's
runs, blobs and journal. Without ``tenant=`` a handle is the *implicit*
tenant, named ``default``: every store made before tenants existed holds
only that tenant's runs, and opens unchanged.

How each backend keeps tenants apart (docs/tenants.md, "What each backend
enforces"):

* PostgreSQL: one schema for all tenants. Every table that holds a tenant's
  rows carries a ``tenant`` column in every unique key, and row-level
  security, forced for the table's owner, admits only the rows of the
  tenant the transaction names with ``set_config('safepoint.tenant', …,
  true)`` (``postgres/``). The store's queries also filter by tenant.
* SQLite: a file per tenant (``tenant_path``), beside the store's file: one
  file has no roles to enforce anything with, so the file itself is the
  boundary — nothing is shared, and the operating system's permissions can
  keep one tenant's file from another's process.

A tenant name is what both can hold safely: a file name and a setting's
value, lowercase letters, digits, ``-`` and ``_``, starting with a letter or
digit, at most 63 characters — never ``..``, a slash, or a name that differs
from another only by case (a case-insensitive file system would merge them).
"""

from __future__ import annotations

import os
import re
from typing import Any

from safepoint.errors import InvalidURL

IMPLICIT = "default"  # the tenant of a handle opened without ``tenant=``
MAX_TENANT_CHARS = 63
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
# The setting every PostgreSQL transaction names its tenant with, and the row-level security
# policies read (DDL revision 12).
SETTING = "safepoint.tenant"


def check_tenant(value: object, *, what: str = "tenant") -> str:
    """``value`` as a tenant name, or ``InvalidURL`` saying what a name may hold (never quoting it)."""
    if not isinstance(value, str):
        raise InvalidURL(f"{what} must be a str, not {type(value).__name__}")
    if not _NAME.fullmatch(value):
        raise InvalidURL(
            f"{what} must be 1 to {MAX_TENANT_CHARS} lowercase letters, digits, '-' or '_', "
            "starting with a letter or digit"
        )
    return value


def tenant_option(options: dict[str, Any]) -> str:
    """The ``tenant=`` option, taken out of ``options``: a checked name, ``IMPLICIT`` when not given."""
    value = options.pop("tenant", None)
    if value is None:
        return IMPLICIT
    return check_tenant(value)


def tenant_path(path: str, tenant: str) -> str:
    """The SQLite file of ``tenant`` in the store whose file is ``path``.

    The implicit tenant's file is the store's own (every store made before
    tenants); another tenant's is ``<folder>/<file>.tenants/<tenant>.db``
    beside it, so that one folder (and one backup of it) holds them all.
    """
    if tenant == IMPLICIT:
        return path
    return os.path.join(path + ".tenants", tenant + ".db")
