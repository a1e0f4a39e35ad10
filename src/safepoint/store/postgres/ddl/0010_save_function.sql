-- Revision 10: a step's save as a function of the schema, and run-row updates
-- that can be HOT.
--
-- safepoint_save_next is save_next (save.sql) stored server-side: the
-- client sends a call of about a hundred bytes instead of 1.2 KB of SQL, so
-- a step's request stays under the size that one send() carries (see
-- ALONE_MAX_BYTES in statements.py) even with 3 KB messages, and PL/pgSQL
-- keeps the statement's plan for the session, which matters behind PgBouncer
-- in transaction mode (prepare_threshold=None: nothing prepared client-side).
-- The JSON parameters come in as text (binary parameters: psycopg sends a
-- str as text, which has no implicit cast to jsonb). The call runs alone,
-- with no search_path statement before it, so the body names its tables
-- with this schema (current_schema() as the revision runs, quoted by
-- format's %I). Not a SET search_path on the function: that would save and
-- restore the setting, and look the path up again, on every call.
--
-- safepoint_runs_updated goes: on PostgreSQL 15 any index on updated_at
-- (BRIN included) stops the run row's update on every save from being HOT,
-- so each save also wrote new entries in every index of the table. Listing
-- runs by updated_at scans the table instead (a few ms at 10,000 runs).
DROP INDEX safepoint_runs_updated;

DO $do$
BEGIN
    EXECUTE format($create$
CREATE FUNCTION %1$I.safepoint_save_next(
    p_run_id text, p_step bigint, p_digest bytea, p_status text, p_schema_version integer,
    p_labels text, p_counters text, p_next_seq bigint, p_now bigint, p_head_digest bytea,
    p_first_seq bigint, p_lease_owner text, p_lease_epoch bigint, p_message_count bigint,
    p_ranges text, p_header bytea, p_added integer, p_messages bytea, p_blobs text,
    p_carriers text, p_chains bytea
) RETURNS SETOF bigint
LANGUAGE plpgsql
AS $fn$
BEGIN
    RETURN QUERY
    WITH head AS (
        UPDATE %1$I.safepoint_runs
        SET head_step = p_step, head_digest = p_digest, status = p_status, status_change = NULL,
            schema_version = p_schema_version, labels = p_labels::jsonb, counters = p_counters::jsonb,
            next_seq = p_next_seq,
            updated_at = 'epoch'::timestamptz + p_now * interval '1 microsecond'
        WHERE run_id = p_run_id
          AND head_step = p_step - 1
          AND head_digest = p_head_digest
          AND next_seq = p_first_seq
          AND CASE WHEN p_lease_owner IS NULL
                   THEN lease_owner IS NULL OR lease_expires_at IS NULL
                        OR lease_expires_at <= 'epoch'::timestamptz + p_now * interval '1 microsecond'
                   ELSE lease_owner = p_lease_owner AND lease_epoch = p_lease_epoch
              END
        RETURNING id)
    INSERT INTO %1$I.safepoint_checkpoints AS c (
        run_ref, step, schema_version, status, created_at, message_count, ranges, header, digest,
        first_seq, added, messages, blobs, carriers, chains, calls
    )
    SELECT head.id, p_step, p_schema_version, p_status,
           'epoch'::timestamptz + p_now * interval '1 microsecond',
           p_message_count, p_ranges::jsonb, p_header, p_digest,
           p_first_seq, p_added, p_messages, p_blobs::jsonb, p_carriers, p_chains,
           (SELECT count(*) FROM %1$I.safepoint_calls AS e WHERE e.run_ref = head.id AND e.step = p_step)
    FROM head
    RETURNING c.run_ref;
END
$fn$
$create$, current_schema());
END
$do$;
