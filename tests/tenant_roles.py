"""The role layout's three roles on the shared server, made and dropped by a test (docs/tenants.md).

Sessions and CI run as a superuser, which row-level security never stops; so
a test about it makes its own roles — an owner that runs the DDL, an
application role with neither superuser nor BYPASSRLS, an operator with
BYPASSRLS and SELECT only — with unique names (roles are cluster-wide), in a
schema of their own, and drops them all at the end, failure or not.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

import safepoint
from conftest_postgres import require_postgres
from safepoint.store.postgres.roles import grant_statements

SMALL = {"min_size": 0, "max_size": 2, "blob_threshold": 256}


@dataclass(frozen=True)
class Cluster:
    """The test's roles and schema on the shared server."""

    dsn: str  # the superuser's
    schema: str
    owner: str
    app: str
    operator: str

    def url(self, role: str) -> str:
        return re.sub(r"^postgresql://[^@/]*@", f"postgresql://{role}@", self.dsn)

    def open(self, role: str, tenant: str | None = None, **options: Any) -> safepoint.Store:
        if tenant is not None:
            options["tenant"] = tenant
        return safepoint.open_store(self.url(role), schema=self.schema, **SMALL, **options)

    def sql(self, role: str, statement: str, tenant: str | None = None) -> list[Any]:
        """One statement as ``role``, in a transaction that sets ``tenant`` when given."""
        with psycopg.connect(self.url(role)) as conn:
            conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(self.schema)))
            if tenant is not None:
                conn.execute("SELECT set_config('safepoint.tenant', %s, true)", (tenant,))
            cursor = conn.execute(statement)  # type: ignore[arg-type]  # the test's own SQL
            return cursor.fetchall() if cursor.description is not None else []


@contextmanager
def roles() -> Iterator[Cluster]:
    """An owner, an application role and an operator, a schema the owner owns; all dropped after."""
    dsn = require_postgres()
    tag = uuid.uuid4().hex[:12]
    cluster = Cluster(dsn, f"sp_test_{tag}", f"sp_{tag}_owner", f"sp_{tag}_app", f"sp_{tag}_operator")
    made: list[str] = []
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for role, extra in ((cluster.owner, ""), (cluster.app, ""), (cluster.operator, " BYPASSRLS")):
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER" + extra).format(sql.Identifier(role)))
                made.append(role)
            conn.execute(
                sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                    sql.Identifier(cluster.schema), sql.Identifier(cluster.owner)
                )
            )
        cluster.open(cluster.owner).close()  # the owner applies the DDL revisions
        with psycopg.connect(cluster.url(cluster.owner), autocommit=True) as conn:
            for grant in grant_statements(cluster.schema, app=cluster.app, operator=cluster.operator):
                conn.execute(grant)
        yield cluster
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(cluster.schema)))
            for role in made:
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
