-- Revision 12: tenants (store/tenants.py, docs/tenants.md).
--
-- Every table that holds a tenant's rows gets a tenant column, in every
-- unique key (uniqueness and foreign-key checks ignore row-level security:
-- a key without the tenant would let one tenant's insert fail on, and so
-- learn of, another's run id or blob). Rows that exist now belong to the
-- implicit tenant, 'default'. From now on a row's tenant comes from the
-- transaction's setting safepoint.tenant (the driver's per-transaction
-- set_config, or safepoint_save_next's first parameter); current_setting
-- without missing_ok raises when a transaction names no tenant, so an
-- insert that forgot fails rather than landing in some tenant.
--
-- The setting's meta rows (the encryption facts: the store id that data
-- keys are bound to, the index key's check value, the state) are a tenant's
-- too: each tenant's keyring has its own key-encryption and index keys. The
-- one store-wide table is safepoint_ddl_revisions.
ALTER TABLE safepoint_runs ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE safepoint_checkpoints ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE safepoint_blobs ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE safepoint_meta ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE safepoint_data_keys ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE safepoint_calls ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE safepoint_redactions ADD COLUMN tenant text NOT NULL DEFAULT 'default';

ALTER TABLE safepoint_runs ALTER COLUMN tenant SET DEFAULT current_setting('safepoint.tenant');
ALTER TABLE safepoint_checkpoints ALTER COLUMN tenant SET DEFAULT current_setting('safepoint.tenant');
ALTER TABLE safepoint_blobs ALTER COLUMN tenant SET DEFAULT current_setting('safepoint.tenant');
ALTER TABLE safepoint_meta ALTER COLUMN tenant SET DEFAULT current_setting('safepoint.tenant');
ALTER TABLE safepoint_data_keys ALTER COLUMN tenant SET DEFAULT current_setting('safepoint.tenant');
ALTER TABLE safepoint_calls ALTER COLUMN tenant SET DEFAULT current_setting('safepoint.tenant');
ALTER TABLE safepoint_redactions ALTER COLUMN tenant SET DEFAULT current_setting('safepoint.tenant');

-- The keys: run ids, blob digests, meta names and data key ids are unique per tenant.
-- (Checkpoints, calls and redactions are keyed by run_ref, the runs row's own id,
-- which no tenant chooses.)
ALTER TABLE safepoint_runs DROP CONSTRAINT safepoint_runs_run_id_key;
ALTER TABLE safepoint_runs ADD CONSTRAINT safepoint_runs_run_id_key UNIQUE (tenant, run_id);
ALTER TABLE safepoint_blobs DROP CONSTRAINT safepoint_blobs_pkey;
ALTER TABLE safepoint_blobs ADD PRIMARY KEY (tenant, digest);
ALTER TABLE safepoint_meta DROP CONSTRAINT safepoint_meta_pkey;
ALTER TABLE safepoint_meta ADD PRIMARY KEY (tenant, name);
ALTER TABLE safepoint_data_keys DROP CONSTRAINT safepoint_data_keys_pkey;
ALTER TABLE safepoint_data_keys ADD PRIMARY KEY (tenant, key_id);

-- The indexes a tenant's queries walk lead with the tenant: its runs by
-- status, its queue in order, its children of a run.
DROP INDEX safepoint_runs_status;
CREATE INDEX safepoint_runs_status ON safepoint_runs (tenant, status, id);
DROP INDEX safepoint_runs_queue;
CREATE INDEX safepoint_runs_queue ON safepoint_runs (tenant, queued_at, id) WHERE queued_at IS NOT NULL;

-- Row-level security, the second lock: a query that forgot its tenant filter
-- still sees only the rows of the tenant its transaction set. FORCE makes it
-- hold for the tables' owner too (only superusers and BYPASSRLS roles pass;
-- docs/tenants.md has the role layout). missing_ok: a transaction that set no
-- tenant sees nothing, rather than failing on the policy itself; after a
-- transaction-local set_config ends, the session's value is '' — which no
-- tenant is named.
--
-- The setting is read by a sub-select, which the planner runs once per
-- statement (an init plan) rather than once for every row a scan walks past:
-- a claim walks past the queue's leased runs, gc and listings a tenant's
-- every run.
--
-- A later revision that updates a tenant's rows runs under these policies as
-- well: it must set safepoint.tenant for each tenant, or be applied by a role
-- with BYPASSRLS.
DO $do$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['safepoint_runs', 'safepoint_checkpoints', 'safepoint_blobs',
                             'safepoint_meta', 'safepoint_data_keys', 'safepoint_calls',
                             'safepoint_redactions'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY safepoint_tenant ON %I USING (tenant = (SELECT current_setting(''safepoint.tenant'', true)))',
            t);
    END LOOP;
END
$do$;

-- safepoint_save_next takes its tenant as its first parameter and sets it for
-- the transaction before it touches a table: the call still goes alone, one
-- statement and one round trip, with no set_config statement before it (a
-- statement's own set_config would not be seen by its row-level security
-- check, which may run first).
DROP FUNCTION safepoint_save_next(
    text, bigint, bytea, text, integer, text, text, bigint, bigint, bytea, bigint, text, bigint,
    bigint, text, bytea, integer, bytea, text, text, bytea);

DO $do$
BEGIN
    EXECUTE format($create$
CREATE FUNCTION %1$I.safepoint_save_next(
    p_tenant text,
    p_run_id text, p_step bigint, p_digest bytea, p_status text, p_schema_version integer,
    p_labels text, p_counters text, p_next_seq bigint, p_now bigint, p_head_digest bytea,
    p_first_seq bigint, p_lease_owner text, p_lease_epoch bigint, p_message_count bigint,
    p_ranges text, p_header bytea, p_added integer, p_messages bytea, p_blobs text,
    p_carriers text, p_chains bytea
) RETURNS SETOF bigint
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM set_config('safepoint.tenant', p_tenant, true);
    RETURN QUERY
    WITH head AS (
        UPDATE %1$I.safepoint_runs
        SET head_step = p_step, head_digest = p_digest, status = p_status, status_change = NULL,
            schema_version = p_schema_version, labels = p_labels::jsonb, counters = p_counters::jsonb,
            next_seq = p_next_seq,
            updated_at = 'epoch'::timestamptz + p_now * interval '1 microsecond'
        WHERE tenant = p_tenant AND run_id = p_run_id
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

-- The fair queue's one look across tenants (queries.sql, claimable_tenants):
-- which of the tenants a worker serves have a run it could claim now. A
-- worker names its tenants; no wildcard exists that the application role
-- could set instead. The function sets each named tenant in turn, so
-- row-level security admits only that tenant's rows while it looks (the
-- caller could set any of them itself: the function gives no reach the role
-- lacks), and sets the caller's tenant back before it returns. Each look is
-- one probe of safepoint_runs_queue (tenant, queued_at, id): a hundred
-- tenants cost one statement.
DO $do$
BEGIN
    EXECUTE format($create$
CREATE FUNCTION %1$I.safepoint_claimable_tenants(
    p_tenants text[], p_now bigint, p_max_version integer
) RETURNS SETOF text
LANGUAGE plpgsql
AS $fn$
DECLARE
    own text := current_setting('safepoint.tenant', true);
    now_at timestamptz := 'epoch'::timestamptz + p_now * interval '1 microsecond';
    t text;
BEGIN
    FOREACH t IN ARRAY p_tenants LOOP
        PERFORM set_config('safepoint.tenant', t, true);
        IF EXISTS (
            SELECT 1 FROM %1$I.safepoint_runs
            WHERE tenant = t AND queued_at IS NOT NULL
              AND (lease_owner IS NULL OR lease_expires_at <= now_at)
              AND (retry_at IS NULL OR retry_at <= now_at)
              AND schema_version <= p_max_version) THEN
            RETURN NEXT t;
        END IF;
    END LOOP;
    PERFORM set_config('safepoint.tenant', coalesce(own, ''), true);
END
$fn$
$create$, current_schema());
END
$do$;

-- The queue's and the leases' hot calls as functions of the schema, as
-- safepoint_save_next is: each takes its tenant first and sets it before it
-- reads a row, so each call still goes alone — one statement, one round
-- trip, nothing before it. (Sent as BEGIN, a settings statement, the UPDATE
-- and COMMIT, a call cost the server 1.2 to 1.5 times the UPDATE alone:
-- docs/benchmarks.md, "Tenants".) The bodies are queries.sql's claim,
-- heartbeat and release; the output columns are named r_* so that none
-- shadows a table column in PL/pgSQL.
DO $do$
BEGIN
    EXECUTE format($create$
CREATE FUNCTION %1$I.safepoint_claim(
    p_tenant text, p_worker_id text, p_now bigint, p_expires_at bigint, p_max_version integer,
    p_held_limit bigint
) RETURNS TABLE (r_run_id text, r_epoch bigint, r_expires_at bigint, r_attempts integer, r_status text)
LANGUAGE plpgsql
AS $fn$
DECLARE
    now_at timestamptz := 'epoch'::timestamptz + p_now * interval '1 microsecond';
BEGIN
    PERFORM set_config('safepoint.tenant', p_tenant, true);
    IF p_held_limit IS NOT NULL THEN
        -- Claims of one tenant under a limit take turns until their commit, so two cannot
        -- both count the tenant's held runs below the limit and both take one.
        PERFORM pg_advisory_xact_lock(
            hashtextextended('safepoint.claims:' || %1$L || ':' || p_tenant, 0));
    END IF;
    RETURN QUERY
    UPDATE %1$I.safepoint_runs AS r
    SET lease_owner = p_worker_id, lease_epoch = r.lease_epoch + 1,
        lease_expires_at = 'epoch'::timestamptz + p_expires_at * interval '1 microsecond',
        attempts = r.attempts + 1, retry_at = NULL
    WHERE r.id = (
        SELECT q.id FROM %1$I.safepoint_runs AS q
        WHERE q.tenant = p_tenant AND q.queued_at IS NOT NULL
          AND (q.lease_owner IS NULL OR q.lease_expires_at <= now_at)
          AND (q.retry_at IS NULL OR q.retry_at <= now_at)
          AND q.schema_version <= p_max_version
          AND (p_held_limit IS NULL
               OR (SELECT count(*) FROM %1$I.safepoint_runs AS h
                   WHERE h.tenant = p_tenant AND h.lease_owner IS NOT NULL
                     AND h.lease_expires_at > now_at) < p_held_limit)
        ORDER BY q.queued_at, q.id
        LIMIT 1
        FOR UPDATE SKIP LOCKED)
    RETURNING r.run_id, r.lease_epoch, (extract(epoch FROM r.lease_expires_at) * 1000000)::bigint,
              r.attempts, r.status;
END
$fn$
$create$, current_schema());
    EXECUTE format($create$
CREATE FUNCTION %1$I.safepoint_heartbeat(
    p_tenant text, p_run_id text, p_worker_id text, p_epoch bigint, p_expires_at bigint
) RETURNS SETOF bigint
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM set_config('safepoint.tenant', p_tenant, true);
    RETURN QUERY
    UPDATE %1$I.safepoint_runs
    SET lease_expires_at = 'epoch'::timestamptz + p_expires_at * interval '1 microsecond'
    WHERE tenant = p_tenant AND run_id = p_run_id AND lease_owner = p_worker_id
      AND lease_epoch = p_epoch
    RETURNING (extract(epoch FROM lease_expires_at) * 1000000)::bigint;
END
$fn$
$create$, current_schema());
    EXECUTE format($create$
CREATE FUNCTION %1$I.safepoint_release(
    p_tenant text, p_run_id text, p_worker_id text, p_epoch bigint, p_status text,
    p_requeue boolean, p_now bigint, p_attempts text, p_retry_at bigint, p_error text
) RETURNS SETOF bigint
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM set_config('safepoint.tenant', p_tenant, true);
    RETURN QUERY
    UPDATE %1$I.safepoint_runs AS r
    SET lease_owner = NULL, lease_expires_at = NULL,
        queued_at = CASE WHEN p_requeue
                         THEN coalesce(r.queued_at, 'epoch'::timestamptz + p_now * interval '1 microsecond')
                    END,
        status = coalesce(p_status, r.status),
        status_change = CASE WHEN p_status IS NULL THEN r.status_change
                             ELSE json_build_object('by', 'release', 'status', p_status,
                                                    'epoch', p_epoch)::text END,
        attempts = CASE p_attempts WHEN 'reset' THEN 0
                                   WHEN 'uncount' THEN greatest(r.attempts - 1, 0)
                                   ELSE r.attempts END,
        retry_at = 'epoch'::timestamptz + p_retry_at * interval '1 microsecond',
        last_error = CASE WHEN p_attempts = 'reset' THEN NULL
                          ELSE coalesce(p_error, r.last_error) END
    WHERE r.tenant = p_tenant AND r.run_id = p_run_id AND r.lease_owner = p_worker_id
      AND r.lease_epoch = p_epoch
    RETURNING r.id;
END
$fn$
$create$, current_schema());
END
$do$;
