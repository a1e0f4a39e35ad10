-- Named statements of the PostgreSQL drivers themselves (not of operations):
-- the per-transaction search_path and the DDL setup. Parameters use
-- psycopg's named style; nothing here is built by string formatting except
-- create_schema's {}, which psycopg.sql fills with a quoted identifier.

-- name: set_search_path
-- is_local = true: the settings end with the transaction. Nothing is left
-- on the connection for the next transaction to rely on, so a connection
-- pooler in transaction mode (PgBouncer) can hand it to anyone.
-- idle_in_transaction_session_timeout: a client stalled in the middle of a
-- transaction (SIGSTOP, a long GC pause, a dead host) would otherwise keep
-- its run row locked, and claim's SKIP LOCKED would skip that run forever.
-- safepoint never leaves a transaction idle on purpose (each is pipelined
-- and runs no user code), so 5 s idle means the client is gone.
-- safepoint.tenant: the tenant whose rows the transaction may see and
-- write, which the tables' row-level security reads (DDL revision 12).
SELECT set_config('search_path', %(search_path)s, true),
       set_config('safepoint.tenant', %(tenant)s, true),
       set_config('idle_in_transaction_session_timeout', '5s', true);

-- name: lock_setup
-- One setup at a time per schema, across every process and machine: a
-- transaction-scoped advisory lock, released by the commit that records the
-- revisions. The key is derived from the schema name, so stores in other
-- schemas of the same database do not wait for each other.
SELECT pg_advisory_xact_lock(hashtext('safepoint:' || %(schema)s));

-- name: schema_exists
-- Checked first (rather than CREATE SCHEMA IF NOT EXISTS) so that a role
-- without CREATE on the database can still open an existing schema.
SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %(schema)s);

-- name: create_schema
CREATE SCHEMA {};

-- name: revisions_table_exists
SELECT EXISTS (
    SELECT 1 FROM pg_tables
    WHERE schemaname = %(schema)s AND tablename = 'safepoint_ddl_revisions');

-- name: create_revisions_table
CREATE TABLE safepoint_ddl_revisions (
    revision    integer     PRIMARY KEY,
    name        text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- name: applied_revisions
SELECT revision FROM safepoint_ddl_revisions ORDER BY revision;

-- name: record_revision
INSERT INTO safepoint_ddl_revisions (revision, name) VALUES (%(revision)s, %(name)s);
