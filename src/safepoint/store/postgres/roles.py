"""The role layout of a PostgreSQL store with tenants: what each role is granted (docs/tenants.md).

Three roles, none a superuser:

* the **owner** owns the schema, its tables and its function, and runs the DDL
  revisions (``safepoint migrate``, or the first read-write open). Row-level
  security is forced on the tenant tables, so even the owner sees only the
  rows of the tenant its transaction names.
* the **application** role (what workers and the application connect as) may
  read and write the tenant tables and read ``safepoint_ddl_revisions``; it
  owns nothing, so it can neither change a table nor switch its row-level
  security off, and it must not have BYPASSRLS.
* the optional **operator** role reads every tenant's rows (the cross-tenant
  view, ``--all-tenants``): it has BYPASSRLS, which only a superuser can give
  (``CREATE ROLE … BYPASSRLS``), and SELECT only — read-only.

``grant_statements`` gives the GRANTs the owner runs once after the schema
exists; a superuser creates the roles themselves.
"""

from __future__ import annotations

from psycopg import sql

# The tables that hold a tenant's rows (DDL revision 12): row-level security, forced.
TENANT_TABLES = (
    "safepoint_runs",
    "safepoint_checkpoints",
    "safepoint_blobs",
    "safepoint_meta",
    "safepoint_data_keys",
    "safepoint_calls",
    "safepoint_redactions",
)
# Store-wide: read by every role, written by the owner alone.
STORE_TABLES = ("safepoint_ddl_revisions",)


def grant_statements(schema: str, *, app: str, operator: str | None = None) -> list[sql.Composed]:
    """The owner's GRANTs for the application role ``app`` (and the read-only ``operator``)."""
    ident = sql.Identifier(schema)
    tenant = sql.SQL(", ").join(sql.Identifier(schema, table) for table in TENANT_TABLES)
    store = sql.SQL(", ").join(sql.Identifier(schema, table) for table in STORE_TABLES)
    grants = [
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident, sql.Identifier(app)),
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(tenant, sql.Identifier(app)),
        sql.SQL("GRANT SELECT ON {} TO {}").format(store, sql.Identifier(app)),
        # The runs table's identity column draws from a sequence.
        sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA {} TO {}").format(ident, sql.Identifier(app)),
        sql.SQL("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {} TO {}").format(ident, sql.Identifier(app)),
    ]
    if operator is not None:
        grants += [
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident, sql.Identifier(operator)),
            sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(ident, sql.Identifier(operator)),
        ]
    return grants
