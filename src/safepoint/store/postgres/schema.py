"""The store's schema on PostgreSQL: create or upgrade it (``setup_statements``), or look at it
for a read-only open (``existing_statements``, ``check_existing``), as statements for a driver.

Each missing numbered revision of ``ddl/`` is applied in order, all of them
on a fresh schema (forward-only; ``tests/test_ddl.py`` and
``tests/test_postgres.py`` prove a store upgraded from any revision equals a
fresh one).
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql

from safepoint.errors import StoreError
from safepoint.store.sqlfiles import load_revisions
from safepoint.store.tenants import IMPLICIT
from safepoint.visible import visible

from .config import PostgresConfig
from .statements import SETUP, Statement, Statements, settings_statement, transaction_settings

_PACKAGE = __package__ or "safepoint.store.postgres"
REVISIONS = load_revisions(_PACKAGE)


def setup_statements(schema: str, search_path: str) -> Statements[list[int]]:
    """Bring the schema's tables up to date; returns the revisions applied now.

    Runs in one transaction under an advisory lock, so processes starting
    together take turns: the first creates the schema (each missing numbered
    revision, every one for a fresh schema), the others find
    it current. All or nothing: PostgreSQL DDL is transactional. Not for a
    pipeline: the DDL files use the simple query protocol.
    """
    yield Statement("lock_setup", SETUP["lock_setup"], {"schema": schema}, fetch=False)
    if not (yield Statement("schema_exists", SETUP["schema_exists"], {"schema": schema}))[0][0]:
        create = sql.SQL(SETUP["create_schema"]).format(sql.Identifier(schema))
        yield Statement("create_schema", create, fetch=False, prepare=False)
    yield settings_statement(transaction_settings(search_path, IMPLICIT))
    applied: set[int] = set()
    if (yield Statement("revisions_table_exists", SETUP["revisions_table_exists"], {"schema": schema}))[0][0]:
        rows = yield Statement("applied_revisions", SETUP["applied_revisions"])
        applied = {row[0] for row in rows}
    else:
        yield Statement("create_revisions_table", SETUP["create_revisions_table"], fetch=False, prepare=False)
    # A fresh schema is one with none applied: the revisions are the one
    # description of the tables, so no second file can drift from them.
    todo = [r for r in REVISIONS if r.number not in applied]
    for revision in todo:
        yield Statement(f"DDL revision {revision.number}", revision.sql, fetch=False, prepare=False)
    for revision in todo:
        params = {"revision": revision.number, "name": revision.name}
        yield Statement("record_revision", SETUP["record_revision"], params, fetch=False)
    return [r.number for r in todo]


@dataclass(frozen=True, slots=True)
class Existing:
    """What a read-only open found in the schema: whether it exists, and the DDL revisions applied there.

    ``revisions`` is None when the schema has no safepoint tables.
    """

    schema_exists: bool
    revisions: frozenset[int] | None


def existing_statements(schema: str, search_path: str) -> Statements[Existing]:
    """Look at the schema without changing anything (a read-only open): no lock, no DDL."""
    if not (yield Statement("schema_exists", SETUP["schema_exists"], {"schema": schema}))[0][0]:
        return Existing(schema_exists=False, revisions=None)
    yield settings_statement(transaction_settings(search_path, IMPLICIT))
    if not (yield Statement("revisions_table_exists", SETUP["revisions_table_exists"], {"schema": schema}))[
        0
    ][0]:
        return Existing(schema_exists=True, revisions=None)
    rows = yield Statement("applied_revisions", SETUP["applied_revisions"])
    return Existing(schema_exists=True, revisions=frozenset(row[0] for row in rows))


def check_existing(config: PostgresConfig, found: Existing) -> None:
    """Raise unless ``found`` is a store this code reads: ``StoreNotFound``, or ``StoreError`` if too old."""
    shown = visible(config.schema, max_len=80)
    if not found.schema_exists:
        raise config.not_found(f'the database has no schema "{shown}"')
    if found.revisions is None:
        raise config.not_found(f'schema "{shown}" has no safepoint tables')
    missing = [r.number for r in REVISIONS if r.number not in found.revisions]
    if missing:
        raise StoreError(
            f'the safepoint store in schema "{shown}" predates this version of safepoint (it lacks DDL'
            f" revision {missing[0]}): open it once for writing (open_store without read_only) to upgrade it"
        )
