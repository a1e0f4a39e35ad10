-- Named queries for the PostgreSQL backend: the same names, parameters and
-- result columns as sqlite/queries.sql (each query's spec header), which store/ops/ relies on.
-- Parameters use psycopg's named style; extra keys in a parameter dict are
-- ignored. Integer parameters are cast to bigint so that PostgreSQL never
-- has to guess a type (psycopg sends small ints as int2) and a prepared
-- statement is reused whatever the value. Comments inside a query must not
-- contain a percent sign: psycopg would read it as a placeholder.
--
-- Isolation: writes run at READ COMMITTED and serialize per run on the run
-- row (run_head and run_exists take it FOR UPDATE). A writer that waited for
-- the lock then reads the row as the previous writer committed it, so the
-- "is this the next step?" check in ops.save sees the new head and answers
-- Conflict. Under REPEATABLE READ the same race would end in a serialization
-- failure instead. Reads run at REPEATABLE READ READ ONLY so that the two
-- queries of a load see one snapshot (a concurrent delete_run cannot remove
-- messages between them).
--
-- Schema: tables are named unqualified (the transaction's search_path
-- points at the store's schema), except in the statements that end their
-- transaction ("ends: transaction"): those go alone, with no search_path
-- statement before them (postgres/statements.py), so they write {schema}.table,
-- which the driver fills with the store's quoted schema name once, when it
-- opens (save_next, claim, heartbeat and release also their {tenant}). A query must not contain
-- other braces.
--
-- Tenants (DDL revision 12, store/tenants.py): every transaction sets
-- safepoint.tenant before its first query (statements.settings_statement).
-- Each query that finds rows by what a tenant names (a run id, a blob
-- digest, a meta name, a data key id) or scans across runs filters by
-- tenant = current_setting('safepoint.tenant'), which the unique keys and
-- indexes lead with; an insert takes its tenant from the column's default,
-- the same setting. Rows found by run_ref come from a run found that way.
-- Row-level security admits the same rows again: the second lock, for a
-- query that forgot (tests/test_tenants_postgres.py removes the filters and
-- still sees nothing foreign).
--
-- Times: ops passes and expects integer microseconds since the epoch; the
-- columns are timestamptz (see ddl/0001_initial.sql for why and how exact).

-- name: run_head
-- params: run_id, labels
-- returns: next_seq, run_ref, head_step, head_digest, status, lease_owner, lease_epoch,
--          lease_expires_at, needs_advance
-- The run row, locked until commit: writers of one run take turns here.
-- No row for a new run (ops then starts its log at seq 0); two writers
-- creating the same run meet at insert_run's ON CONFLICT instead.
SELECT next_seq, id, head_step, head_digest,
       CASE WHEN status_change IS NULL THEN status END,  -- see the SQLite query
       lease_owner, lease_epoch, (extract(epoch FROM lease_expires_at) * 1000000)::bigint,
       true  -- the run row holds the head here: advance_run on every save
FROM safepoint_runs
WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s
FOR UPDATE;

-- name: insert_run
-- params: run_id, status, step, digest, schema_version, labels, counters, parent_run_id,
--         parent_step, next_seq, now
-- returns: run_ref
-- No row back means another writer created the run first (ops: Conflict).
INSERT INTO safepoint_runs (
    run_id, status, head_step, head_digest, schema_version, labels, counters,
    parent_run_id, parent_step, next_seq, created_at, updated_at
) VALUES (
    %(run_id)s, %(status)s, %(step)s::bigint, %(digest)s, %(schema_version)s::integer,
    %(labels)s::jsonb, %(counters)s::jsonb, %(parent_run_id)s, %(parent_step)s::bigint,
    %(next_seq)s::bigint,
    'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond',
    'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond'
)
ON CONFLICT (tenant, run_id) DO NOTHING
RETURNING id;

-- name: advance_run
-- params: run_ref, step, digest, schema_version, labels, counters, next_seq, now
-- returns: nothing
-- status is set by set_run_status, only when it changes (as on SQLite).
UPDATE safepoint_runs
SET head_step = %(step)s::bigint, head_digest = %(digest)s,
    schema_version = %(schema_version)s::integer,
    labels = %(labels)s::jsonb, counters = %(counters)s::jsonb, next_seq = %(next_seq)s::bigint,
    updated_at = 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond'
WHERE id = %(run_ref)s::bigint AND head_step = %(step)s::bigint - 1;

-- name: set_run_status
-- params: run_ref, status
-- returns: nothing
-- A save's status is its checkpoint's: a recorded status_change no longer applies.
UPDATE safepoint_runs SET status = %(status)s, status_change = NULL WHERE id = %(run_ref)s::bigint;

-- name: insert_checkpoint
-- params: run_ref, step, schema_version, status, now, message_count, ranges, header,
--         digest, first_seq, added, messages, blobs, carriers, chains
-- returns: nothing
INSERT INTO safepoint_checkpoints (
    run_ref, step, schema_version, status, created_at, message_count, ranges, header, digest,
    first_seq, added, messages, blobs, carriers, chains, calls
) VALUES (
    %(run_ref)s::bigint, %(step)s::bigint, %(schema_version)s::integer, %(status)s,
    'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond',
    %(message_count)s::bigint, %(ranges)s::jsonb, %(header)s, %(digest)s,
    %(first_seq)s::bigint, %(added)s::integer, %(messages)s, %(blobs)s::jsonb, %(carriers)s,
    %(chains)s,
    (SELECT count(*) FROM safepoint_calls
     WHERE run_ref = %(run_ref)s::bigint AND step = %(step)s::bigint)  -- the entries it covers
);

-- name: checkpoint_latest
-- params: run_id
-- returns: run_ref, step, ranges, header, digest, head_step, head_digest, last_step, carriers
-- ranges goes back as text: ops hands it to view_messages and json-decodes it.
-- The head is where the run row says; ops checks it against the rows (its
-- digest, and the highest stored step: one backward primary-key probe), so a
-- head moved back or a head row deleted is CorruptCheckpoint, not an older
-- checkpoint or NotFound. Hence the LEFT JOIN: a run row without its head
-- row still comes back.
SELECT r.id, c.step, c.ranges::text, c.header, c.digest, r.head_step, r.head_digest,
       (SELECT max(k.step) FROM safepoint_checkpoints AS k WHERE k.run_ref = r.id), c.carriers
FROM safepoint_runs AS r
LEFT JOIN safepoint_checkpoints AS c ON c.run_ref = r.id AND c.step = r.head_step
WHERE r.tenant = current_setting('safepoint.tenant') AND r.run_id = %(run_id)s;

-- name: checkpoint_at
-- params: run_id, step
-- returns: run_ref, step, ranges, header, digest, carriers
SELECT r.id, c.step, c.ranges::text, c.header, c.digest, c.carriers
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c ON c.run_ref = r.id AND c.step = %(step)s::bigint AND NOT c.pruned
WHERE r.tenant = current_setting('safepoint.tenant') AND r.run_id = %(run_id)s;

-- name: view_span
-- params: run_ref, first_step, last_step, span_start, span_end
-- returns: step, first_seq, added, messages
-- view_carriers for a checkpoint of one range (an appending run's, the
-- usual load): one primary-key range scan with plain parameters.
SELECT c.step, c.first_seq, c.added, c.messages
FROM safepoint_checkpoints AS c
WHERE c.run_ref = %(run_ref)s::bigint
  AND c.step BETWEEN %(first_step)s::bigint AND %(last_step)s::bigint
  AND c.added > 0
  AND c.first_seq < %(span_end)s::bigint AND c.first_seq + c.added > %(span_start)s::bigint
ORDER BY c.step;

-- name: view_carriers
-- params: run_ref, spans
-- returns: step, first_seq, added, messages
-- The rows that added the messages a checkpoint sees, in log order, by
-- primary key: one short range scan per range (see the SQLite query). A
-- damaged span shows up as missing messages, which the load reports as
-- CorruptCheckpoint.
SELECT c.step, c.first_seq, c.added, c.messages
FROM safepoint_checkpoints AS c
WHERE c.run_ref = %(run_ref)s::bigint
  AND c.step IN (
      SELECT k.step
      FROM jsonb_array_elements(%(spans)s::jsonb) AS s (span)
      JOIN safepoint_checkpoints AS k
        ON k.run_ref = %(run_ref)s::bigint
       AND k.step BETWEEN (s.span ->> 0)::bigint AND (s.span ->> 1)::bigint
      WHERE k.added > 0
        AND k.first_seq < (s.span ->> 3)::bigint AND k.first_seq + k.added > (s.span ->> 2)::bigint)
ORDER BY c.step;

-- name: view_chains
-- params: run_ref, spans
-- returns: step, first_seq, chains
-- view_carriers without the messages: the chain values of the rows that
-- carry a checkpoint's messages, for a save that compares with the head
-- without reading its bodies.
SELECT c.step, c.first_seq, c.chains
FROM safepoint_checkpoints AS c
WHERE c.run_ref = %(run_ref)s::bigint
  AND c.step IN (
      SELECT k.step
      FROM jsonb_array_elements(%(spans)s::jsonb) AS s (span)
      JOIN safepoint_checkpoints AS k
        ON k.run_ref = %(run_ref)s::bigint
       AND k.step BETWEEN (s.span ->> 0)::bigint AND (s.span ->> 1)::bigint
      WHERE k.added > 0
        AND k.first_seq < (s.span ->> 3)::bigint AND k.first_seq + k.added > (s.span ->> 2)::bigint)
ORDER BY c.step;

-- name: view_messages
-- params: run_ref, ranges
-- returns: step, first_seq, added, messages
-- What view_carriers does for a checkpoint written before the carriers
-- column (revision 6): the run's rows tested against every range, in one
-- query (one primary-key range scan of the run's checkpoints).
SELECT c.step, c.first_seq, c.added, c.messages
FROM safepoint_checkpoints AS c
WHERE c.run_ref = %(run_ref)s::bigint
  AND c.added > 0
  AND EXISTS (
      SELECT 1 FROM jsonb_array_elements(%(ranges)s::jsonb) AS r (span)
      WHERE c.first_seq < (r.span ->> 1)::bigint AND c.first_seq + c.added > (r.span ->> 0)::bigint)
ORDER BY c.step;

-- name: history
-- params: run_id
-- returns: step, schema_version, status, created_at, message_count, digest
SELECT c.step, c.schema_version, c.status,
       (extract(epoch FROM c.created_at) * 1000000)::bigint,
       c.message_count, c.digest
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c ON c.run_ref = r.id
WHERE r.tenant = current_setting('safepoint.tenant') AND r.run_id = %(run_id)s AND NOT c.pruned
ORDER BY c.step;

-- name: forks_of
-- params: run_id
-- returns: run_id, parent_step
SELECT run_id, parent_step FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant') AND parent_run_id = %(run_id)s ORDER BY id LIMIT 100;

-- name: timeline
-- params: run_id
-- returns: step, created_at, message_count, header, stored_bytes
SELECT c.step, (extract(epoch FROM c.created_at) * 1000000)::bigint, c.message_count, c.header,
       octet_length(c.header) + coalesce(octet_length(c.messages), 0) + coalesce(octet_length(c.chains), 0)
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c ON c.run_ref = r.id
WHERE r.tenant = current_setting('safepoint.tenant') AND r.run_id = %(run_id)s AND NOT c.pruned
ORDER BY c.step;

-- name: run_exists
-- params: run_id
-- returns: run_ref
-- Locked like run_head: delete_run then waits for a save of the run in
-- flight (and sees its rows) instead of failing on its foreign keys, and a
-- fork copies from a source that cannot be deleted under it.
SELECT id FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s FOR UPDATE;

-- name: run_info
-- params: run_id
-- returns: run_ref, run_id, status, head_step, schema_version, labels, counters,
--          created_at, updated_at, parent_run_id, parent_step, attempts, retry_at,
--          last_error
SELECT id, run_id, status, head_step, schema_version, labels::text, counters::text,
       (extract(epoch FROM created_at) * 1000000)::bigint,
       (extract(epoch FROM updated_at) * 1000000)::bigint,
       parent_run_id, parent_step,
       attempts, (extract(epoch FROM retry_at) * 1000000)::bigint, last_error
FROM safepoint_runs
WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s;

-- name: list_runs
-- params: statuses, labels, updated_since, updated_until, before_id, prefix, limit
-- returns: run_ref, run_id, status, head_step, schema_version, labels, counters,
--          created_at, updated_at, parent_run_id, parent_step, attempts, retry_at,
--          last_error
-- Newest first, paged by the run's row id (stable while runs are updated).
-- Each filter is switched off by a NULL parameter. Labels match when the
-- run's labels contain every wanted pair (the GIN index serves the @>).
SELECT id, run_id, status, head_step, schema_version, labels::text, counters::text,
       (extract(epoch FROM created_at) * 1000000)::bigint,
       (extract(epoch FROM updated_at) * 1000000)::bigint,
       parent_run_id, parent_step,
       attempts, (extract(epoch FROM retry_at) * 1000000)::bigint, last_error
FROM safepoint_runs
WHERE tenant = current_setting('safepoint.tenant')
  AND (%(statuses)s::jsonb IS NULL
       OR status IN (SELECT jsonb_array_elements_text(%(statuses)s::jsonb)))
  AND (%(labels)s::jsonb IS NULL OR labels @> %(labels)s::jsonb)
  AND (%(updated_since)s::bigint IS NULL
       OR updated_at >= 'epoch'::timestamptz + %(updated_since)s::bigint * interval '1 microsecond')
  AND (%(updated_until)s::bigint IS NULL
       OR updated_at <= 'epoch'::timestamptz + %(updated_until)s::bigint * interval '1 microsecond')
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
  AND (%(prefix)s::text IS NULL OR starts_with(run_id, %(prefix)s::text))  -- not LIKE: no wildcards
ORDER BY id DESC
LIMIT %(limit)s::bigint;

-- name: run_counters
-- params: statuses, labels, hidden, updated_since, updated_until
-- returns: run_id, head_step, updated_at, counters
-- Each run's head counters and last update, for sums (safepoint.totals):
-- list_runs' filters without its page or its other columns, in one query.
-- :hidden is a JSON list of label sets: a run whose labels contain any of
-- them (an adapter's bookkeeping) is left out.
SELECT run_id, head_step, (extract(epoch FROM updated_at) * 1000000)::bigint, counters::text
FROM safepoint_runs
WHERE tenant = current_setting('safepoint.tenant')
  AND (%(statuses)s::jsonb IS NULL
       OR status IN (SELECT jsonb_array_elements_text(%(statuses)s::jsonb)))
  AND (%(labels)s::jsonb IS NULL OR labels @> %(labels)s::jsonb)
  AND (%(hidden)s::jsonb IS NULL OR NOT EXISTS (
        SELECT 1 FROM jsonb_array_elements(%(hidden)s::jsonb) AS rule (wanted)
        WHERE labels @> rule.wanted))
  AND (%(updated_since)s::bigint IS NULL
       OR updated_at >= 'epoch'::timestamptz + %(updated_since)s::bigint * interval '1 microsecond')
  AND (%(updated_until)s::bigint IS NULL
       OR updated_at <= 'epoch'::timestamptz + %(updated_until)s::bigint * interval '1 microsecond');

-- name: list_runs_sorted
-- params: statuses, labels, updated_since, updated_until, prefix, sort, descending,
--         after_text, after_number, after_id, limit
-- returns: run_ref, run_id, status, head_step, schema_version, labels, counters,
--          created_at, updated_at, parent_run_id, parent_step, attempts, retry_at,
--          last_error
-- list_runs' runs and filters in another order (see the SQLite query). Text
-- keys compare in the "C" collation, code point by code point, as SQLite's do,
-- so a cursor means the same on both backends and whatever the database's
-- locale. No index serves it: the filtered runs are sorted whole.
SELECT run_ref, run_id, status, head_step, schema_version, labels, counters,
       created_at, updated_at, parent_run_id, parent_step, attempts, retry_at, last_error
FROM (
    SELECT id AS run_ref, run_id, status, head_step, schema_version,
           labels::text AS labels, counters::text AS counters,
           (extract(epoch FROM created_at) * 1000000)::bigint AS created_at,
           (extract(epoch FROM updated_at) * 1000000)::bigint AS updated_at,
           parent_run_id, parent_step,
           attempts, (extract(epoch FROM retry_at) * 1000000)::bigint AS retry_at, last_error,
           (CASE %(sort)s::text WHEN 'run_id' THEN run_id WHEN 'status' THEN status ELSE '' END)
               COLLATE "C" AS text_key,
           CASE %(sort)s::text
               WHEN 'updated' THEN (extract(epoch FROM updated_at) * 1000000)::bigint
               WHEN 'step' THEN head_step::bigint ELSE 0 END AS number_key
    FROM safepoint_runs
    WHERE tenant = current_setting('safepoint.tenant')
      AND (%(statuses)s::jsonb IS NULL
           OR status IN (SELECT jsonb_array_elements_text(%(statuses)s::jsonb)))
      AND (%(labels)s::jsonb IS NULL OR labels @> %(labels)s::jsonb)
      AND (%(updated_since)s::bigint IS NULL
           OR updated_at >= 'epoch'::timestamptz + %(updated_since)s::bigint * interval '1 microsecond')
      AND (%(updated_until)s::bigint IS NULL
           OR updated_at <= 'epoch'::timestamptz + %(updated_until)s::bigint * interval '1 microsecond')
      AND (%(prefix)s::text IS NULL OR starts_with(run_id, %(prefix)s::text))  -- not LIKE: no wildcards
) AS listed
WHERE %(after_id)s::bigint IS NULL
   OR (%(descending)s::boolean
       AND (text_key, number_key, run_ref)
           < (%(after_text)s::text COLLATE "C", %(after_number)s::bigint, %(after_id)s::bigint))
   OR (NOT %(descending)s::boolean
       AND (text_key, number_key, run_ref)
           > (%(after_text)s::text COLLATE "C", %(after_number)s::bigint, %(after_id)s::bigint))
-- One ORDER BY for both ways: the terms of the way not asked are NULL on every row.
ORDER BY CASE WHEN %(descending)s::boolean THEN text_key END DESC,
         CASE WHEN %(descending)s::boolean THEN number_key END DESC,
         CASE WHEN %(descending)s::boolean THEN run_ref END DESC,
         text_key, number_key, run_ref
LIMIT %(limit)s::bigint;

-- name: delete_checkpoints
-- params: run_ref
-- returns: nothing
DELETE FROM safepoint_checkpoints WHERE run_ref = %(run_ref)s::bigint;

-- name: delete_run
-- params: run_ref
-- returns: nothing
DELETE FROM safepoint_runs WHERE id = %(run_ref)s::bigint;

-- name: enqueue
-- params: run_id, now
-- returns: run_ref
-- ends: transaction
UPDATE {schema}.safepoint_runs
SET queued_at = coalesce(queued_at, 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond')
WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s
RETURNING id;

-- name: claimable_tenants
-- params: tenants, now, max_version
-- returns: tenant
-- optional: yes
-- Which of the tenants (a JSON list) have a run a claim could take now: the
-- fair queue's one look across a worker's tenants (DDL revision 12's
-- function, which sets each tenant in turn for row-level security).
SELECT * FROM safepoint_claimable_tenants(
    ARRAY(SELECT jsonb_array_elements_text(%(tenants)s::jsonb)), %(now)s::bigint, %(max_version)s::integer);

-- name: claim
-- params: worker_id, now, expires_at, max_version, held_limit
-- returns: run_id, epoch, expires_at, attempts, status
-- ends: transaction
-- One statement: take the oldest queued run whose lease is free or expired
-- and bump its epoch. The statement is the schema's function safepoint_claim
-- (DDL revision 12), which sets the tenant and runs the UPDATE: FOR UPDATE
-- SKIP LOCKED lets concurrent claimers pass each other instead of queueing
-- on the same row: each locks a different run, and a run being saved (its
-- row locked by run_head) is skipped. A row another claimer changed since
-- the statement's snapshot is re-checked against the WHERE clause when
-- locked, so a claimed run is never taken twice. The attempt is counted
-- here, and retry_at respected, and a run newer than the claimer
-- (max_version) left for newer code (see the SQLite query); the run row's
-- schema_version is its head's, kept by every save. The row's status comes
-- back with the lease (see the SQLite query). With held_limit, nothing is
-- claimed while the tenant already holds that many live leases: claims under
-- a limit take turns on a per-tenant advisory lock, and the count walks the
-- tenant's runs, paid only by claims under a limit.
SELECT * FROM {schema}.safepoint_claim(
    {tenant}, %(worker_id)s::text, %(now)s::bigint, %(expires_at)s::bigint, %(max_version)s::integer,
    %(held_limit)s::bigint);

-- name: queue_depth
-- params: now
-- returns: depth
-- How many runs a claim could take now (see the SQLite query).
SELECT count(*) FROM safepoint_runs
WHERE tenant = current_setting('safepoint.tenant') AND queued_at IS NOT NULL
  AND (lease_owner IS NULL
       OR lease_expires_at <= 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond')
  AND (retry_at IS NULL
       OR retry_at <= 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond');

-- name: run_counts
-- params: now, soon
-- returns: status, runs, queued, leased, expiring
SELECT status, count(*),
       count(*) FILTER (WHERE queued_at IS NOT NULL),
       count(*) FILTER (WHERE lease_owner IS NOT NULL
                        AND lease_expires_at > 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond'),
       count(*) FILTER (WHERE lease_owner IS NOT NULL
                        AND lease_expires_at > 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond'
                        AND lease_expires_at <= 'epoch'::timestamptz + %(soon)s::bigint * interval '1 microsecond')
FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant') GROUP BY status ORDER BY status;

-- name: heartbeat
-- params: run_id, worker_id, epoch, expires_at
-- returns: expires_at
-- ends: transaction
-- The lease extended, if it is still this worker's at this epoch: the schema's
-- function safepoint_heartbeat (DDL revision 12; see claim).
SELECT * FROM {schema}.safepoint_heartbeat(
    {tenant}, %(run_id)s::text, %(worker_id)s::text, %(epoch)s::bigint, %(expires_at)s::bigint);

-- name: release
-- params: run_id, worker_id, epoch, status, requeue, now, attempts, retry_at, error
-- returns: run_ref
-- ends: transaction
-- The epoch stays: it only ever grows, so an old lease can never match again.
-- The schema's function safepoint_release (DDL revision 12; see claim); the
-- attempts parameter is 'keep', 'reset' or 'uncount' (see the SQLite query).
SELECT * FROM {schema}.safepoint_release(
    {tenant}, %(run_id)s::text, %(worker_id)s::text, %(epoch)s::bigint, %(status)s::text,
    %(requeue)s::boolean, %(now)s::bigint, %(attempts)s::text, %(retry_at)s::bigint, %(error)s::text);

-- name: requeue
-- params: run_id, now
-- returns: run_ref
-- Back in the queue with a clean slate of attempts (see the SQLite query).
UPDATE safepoint_runs
SET queued_at = coalesce(queued_at, 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond'),
    attempts = 0, retry_at = NULL,
    status = CASE WHEN status = 'failed' THEN 'running' ELSE status END,
    status_change = CASE WHEN status = 'failed'
                         THEN json_build_object('by', 'requeue', 'status', 'running',
                                                'epoch', lease_epoch)::text
                         ELSE status_change END
WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s
RETURNING id;

-- name: next_claimable
-- params: max_version
-- returns: at
-- When the next queued run the caller could claim can be claimed (see the
-- SQLite query); greatest() skips NULLs, and coalesce makes "free now" the epoch.
SELECT (extract(epoch FROM min(coalesce(greatest(lease_expires_at, retry_at), 'epoch'::timestamptz)))
        * 1000000)::bigint
FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant') AND queued_at IS NOT NULL AND schema_version <= %(max_version)s::integer;

-- name: queued_too_new
-- params: max_version
-- returns: runs
-- Queued runs newer than :max_version (see the SQLite query).
SELECT count(*) FROM safepoint_runs
WHERE tenant = current_setting('safepoint.tenant') AND queued_at IS NOT NULL AND schema_version > %(max_version)s::integer;

-- name: lease_state
-- params: run_id
-- returns: owner, epoch
SELECT lease_owner, lease_epoch FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s;

-- name: hold_run
-- params: run_id, owner, now, expires_at, take_from
-- returns: epoch, expires_at
-- ends: transaction
-- One named run's lease, outside the queue (see the SQLite query). The
-- UPDATE locks the row: a save of the run in flight finishes first, and a
-- concurrent hold re-checks the WHERE clause once it gets the lock, so two
-- openers never both take it.
UPDATE {schema}.safepoint_runs
SET lease_owner = %(owner)s,
    lease_expires_at = 'epoch'::timestamptz + %(expires_at)s::bigint * interval '1 microsecond'
WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s
  AND (lease_owner IS NULL
       OR lease_expires_at <= 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond'
       OR lease_owner = %(take_from)s::text)
RETURNING lease_epoch, (extract(epoch FROM lease_expires_at) * 1000000)::bigint;

-- name: release_hold
-- params: run_id, owner, epoch
-- returns: run_ref
-- ends: transaction
-- Give a hold back: the lease only (see the SQLite query).
UPDATE {schema}.safepoint_runs SET lease_owner = NULL, lease_expires_at = NULL
WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s AND lease_owner = %(owner)s AND lease_epoch = %(epoch)s::bigint
RETURNING id;

-- name: head_messages
-- params: run_ref, step
-- returns: first_seq, added, messages, chains
-- The messages the head row carries (eager migration appends to them).
SELECT first_seq, added, messages, chains FROM safepoint_checkpoints
WHERE run_ref = %(run_ref)s::bigint AND step = %(step)s::bigint;

-- name: rewrite_checkpoint
-- params: run_ref, step, schema_version, status, message_count, ranges, header, digest,
--         added, messages, carriers, chains
-- returns: nothing
-- Eager migration replaces the head checkpoint in place (see the SQLite
-- query of the same name for why older checkpoints are unaffected).
UPDATE safepoint_checkpoints
SET schema_version = %(schema_version)s, status = %(status)s,
    message_count = %(message_count)s::bigint, ranges = %(ranges)s::jsonb, header = %(header)s,
    digest = %(digest)s, added = %(added)s, messages = %(messages)s, carriers = %(carriers)s,
    chains = %(chains)s
WHERE run_ref = %(run_ref)s::bigint AND step = %(step)s::bigint;

-- name: rewrite_run_head
-- params: run_ref, digest, schema_version, labels, counters, next_seq, status
-- returns: nothing
UPDATE safepoint_runs
SET head_digest = %(digest)s, schema_version = %(schema_version)s, labels = %(labels)s::jsonb,
    counters = %(counters)s::jsonb, next_seq = %(next_seq)s::bigint, status = %(status)s,
    status_change = NULL
WHERE id = %(run_ref)s::bigint;

-- name: blob_guard_shared
-- params: none
-- returns: held
-- Saves that reference blobs hold this lock shared until they commit, and
-- garbage collection exclusively: a blob is never judged unreferenced while
-- a save that references it is between its put and its commit. The key is
-- per schema (current_schema() is the store's, set by set_search_path).
SELECT pg_advisory_xact_lock_shared(hashtextextended('safepoint.blobs:' || current_schema() || ':' || current_setting('safepoint.tenant'), 0));

-- name: blob_guard_exclusive
-- params: none
-- returns: held
SELECT pg_advisory_xact_lock(hashtextextended('safepoint.blobs:' || current_schema() || ':' || current_setting('safepoint.tenant'), 0));

-- name: insert_blobs
-- params: digest, size, now, data
-- returns: nothing
INSERT INTO safepoint_blobs (digest, size, created_at, data)
VALUES (%(digest)s, %(size)s::bigint, 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond',
        %(data)s)
ON CONFLICT (tenant, digest) DO NOTHING;

-- name: select_blobs
-- params: digests
-- returns: digest, data
SELECT digest, data FROM safepoint_blobs
WHERE tenant = current_setting('safepoint.tenant') AND digest IN (SELECT jsonb_array_elements_text(%(digests)s::jsonb));

-- name: set_run_retention
-- params: run_id, retention
-- returns: run_ref
UPDATE safepoint_runs SET retention = %(retention)s::jsonb WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s RETURNING id;

-- name: run_retention
-- params: run_id
-- returns: run_ref, retention, status, labels
-- Locked like run_head: a save of the run waits, so retention never decides
-- on a head that is being replaced.
SELECT id, retention::text, status, labels::text FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s FOR UPDATE;

-- name: checkpoint_spans
-- params: run_ref
-- returns: step, created_at, first_seq, added, ranges, pruned, header_size, stored_size
-- The sizes are as stored before TOAST compression (what the report counts as freed).
SELECT step, (extract(epoch FROM created_at) * 1000000)::bigint, first_seq, added, ranges::text, pruned,
       octet_length(header)::bigint,
       (coalesce(octet_length(messages), 0) + octet_length(ranges::text)
        + coalesce(octet_length(blobs::text), 0))::bigint
FROM safepoint_checkpoints
WHERE run_ref = %(run_ref)s::bigint
ORDER BY step;

-- name: carried_messages
-- params: run_ref, step
-- returns: messages
SELECT messages FROM safepoint_checkpoints WHERE run_ref = %(run_ref)s::bigint AND step = %(step)s::bigint;

-- name: make_carrier
-- params: run_ref, step, blobs
-- returns: nothing
UPDATE safepoint_checkpoints
SET pruned = true, header = ''::bytea, ranges = '[]'::jsonb, blobs = %(blobs)s::jsonb
WHERE run_ref = %(run_ref)s::bigint AND step = %(step)s::bigint;

-- name: delete_checkpoint_row
-- params: run_ref, step
-- returns: nothing
DELETE FROM safepoint_checkpoints WHERE run_ref = %(run_ref)s::bigint AND step = %(step)s::bigint;

-- name: referenced_blobs
-- params: none
-- returns: blobs
SELECT blobs::text FROM safepoint_checkpoints WHERE tenant = current_setting('safepoint.tenant') AND blobs IS NOT NULL
UNION ALL SELECT blobs::text FROM safepoint_calls WHERE tenant = current_setting('safepoint.tenant') AND blobs IS NOT NULL;

-- name: stored_blobs
-- params: none
-- returns: digest, size, created_at
SELECT digest, octet_length(data), (extract(epoch FROM created_at) * 1000000)::bigint FROM safepoint_blobs
WHERE tenant = current_setting('safepoint.tenant');

-- name: delete_blobs
-- params: digest
-- returns: nothing
DELETE FROM safepoint_blobs WHERE tenant = current_setting('safepoint.tenant') AND digest = %(digest)s;

-- name: status_origin
-- params: run_id
-- returns: status, epoch, status_change
-- The run row's status and the record of the change that set it without a
-- checkpoint, if any (see the SQLite query).
SELECT status, lease_epoch, status_change FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s;

-- name: queue_state
-- params: run_id
-- returns: queued, owner, epoch, expires_at, status
-- Where a run stands with the workers (Store.queue_state), and the row's status.
SELECT queued_at IS NOT NULL, lease_owner, lease_epoch,
       (extract(epoch FROM lease_expires_at) * 1000000)::bigint, status
FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s;

-- name: queue_state_for_update
-- params: run_id
-- returns: queued, owner, epoch, expires_at, status
-- The same, the run row locked until commit like run_head: a save in flight
-- finishes first, and a save that comes later waits, then fails its lease check.
SELECT queued_at IS NOT NULL, lease_owner, lease_epoch,
       (extract(epoch FROM lease_expires_at) * 1000000)::bigint, status
FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s
FOR UPDATE;

-- name: revoke_lease
-- params: run_id
-- returns: nothing
-- The holder is fenced and the run dequeued (see the SQLite query).
UPDATE safepoint_runs SET lease_owner = NULL, lease_expires_at = NULL, queued_at = NULL
WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s;

-- name: cancel_run
-- params: run_id
-- returns: nothing
UPDATE safepoint_runs
SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, queued_at = NULL,
    retry_at = NULL,
    status_change = json_build_object('by', 'cancel', 'status', 'cancelled', 'epoch', lease_epoch)::text
WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s;

-- name: run_retention_read
-- params: run_id
-- returns: run_ref, retention, status, labels
-- run_retention for a dry run, which runs READ ONLY: FOR UPDATE is refused there.
SELECT id, retention::text, status, labels::text FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s;

-- name: store_meta
-- params: none
-- returns: name, value
SELECT name, value FROM safepoint_meta WHERE tenant = current_setting('safepoint.tenant');

-- name: set_store_meta
-- params: name, value
-- returns: nothing
INSERT INTO safepoint_meta (name, value) VALUES (%(name)s, %(value)s) ON CONFLICT (tenant, name) DO NOTHING;

-- name: data_keys
-- params: none
-- returns: key_id, kek_id, wrapped, created_at
SELECT key_id, kek_id, wrapped, (extract(epoch FROM created_at) * 1000000)::bigint
FROM safepoint_data_keys WHERE tenant = current_setting('safepoint.tenant') ORDER BY created_at, key_id;

-- name: insert_data_key
-- params: key_id, kek_id, wrapped, now
-- returns: nothing
INSERT INTO safepoint_data_keys (key_id, kek_id, wrapped, created_at)
VALUES (%(key_id)s, %(kek_id)s, %(wrapped)s,
        'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond');

-- name: rewrap_data_key
-- params: key_id, kek_id, wrapped
-- returns: nothing
UPDATE safepoint_data_keys SET kek_id = %(kek_id)s, wrapped = %(wrapped)s WHERE tenant = current_setting('safepoint.tenant') AND key_id = %(key_id)s;

-- name: runs_after
-- params: after_ref, limit
-- returns: run_ref, run_id
SELECT id, run_id FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant') AND id > %(after_ref)s::bigint ORDER BY id LIMIT %(limit)s::bigint;

-- name: sealed_run
-- params: run_ref
-- returns: labels, counters, last_error, head_digest
-- Locked until commit, as run_head locks it: the run's writers wait for the reseal.
SELECT labels::text, counters::text, last_error, head_digest FROM safepoint_runs
WHERE id = %(run_ref)s::bigint FOR UPDATE;

-- name: sealed_rows
-- params: run_ref
-- returns: step, header, digest, messages, chains
SELECT step, header, digest, messages, chains FROM safepoint_checkpoints
WHERE run_ref = %(run_ref)s::bigint ORDER BY step;

-- name: reseal_row
-- params: run_ref, step, header, digest, messages, chains
-- returns: nothing
UPDATE safepoint_checkpoints
SET header = %(header)s, digest = %(digest)s, messages = %(messages)s, chains = %(chains)s
WHERE run_ref = %(run_ref)s::bigint AND step = %(step)s::bigint;

-- name: reseal_run
-- params: run_ref, labels, counters, error, head_digest
-- returns: nothing
UPDATE safepoint_runs
SET labels = %(labels)s::jsonb, counters = %(counters)s::jsonb, last_error = %(error)s,
    head_digest = %(head_digest)s
WHERE id = %(run_ref)s::bigint;

-- name: blobs_after
-- params: after_digest, limit
-- returns: digest, data
SELECT digest, data FROM safepoint_blobs WHERE tenant = current_setting('safepoint.tenant') AND digest > %(after_digest)s ORDER BY digest
LIMIT %(limit)s::bigint;

-- name: reseal_blob
-- params: digest, data
-- returns: nothing
UPDATE safepoint_blobs SET data = %(data)s WHERE tenant = current_setting('safepoint.tenant') AND digest = %(digest)s;

-- name: replace_store_meta
-- params: name, value
-- returns: nothing
-- A fact that changes (the encryption state: converting, then on).
INSERT INTO safepoint_meta (name, value) VALUES (%(name)s, %(value)s)
ON CONFLICT (tenant, name) DO UPDATE SET value = excluded.value;

-- name: history_sealed
-- params: run_id
-- returns: step, schema_version, status, created_at, message_count, digest, header
SELECT c.step, c.schema_version, c.status,
       (extract(epoch FROM c.created_at) * 1000000)::bigint,
       c.message_count, c.digest, c.header
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c ON c.run_ref = r.id
WHERE r.tenant = current_setting('safepoint.tenant') AND r.run_id = %(run_id)s AND NOT c.pruned
ORDER BY c.step;


-- name: sealed_run_read
-- params: run_ref
-- returns: labels, counters, last_error, head_digest
-- sealed_run for rekey --status: read only, nothing locked.
SELECT labels::text, counters::text, last_error, head_digest FROM safepoint_runs
WHERE id = %(run_ref)s::bigint;

-- The call journal (revision 9; see the SQLite queries for what each does).

-- name: call_run
-- params: run_id
-- returns: run_ref, head_step, lease_owner, lease_epoch, lease_expires_at
-- FOR SHARE: a claim, hold or save of the run waits until this write commits,
-- so the lease checked here is the lease when it commits.
SELECT id, head_step, lease_owner, lease_epoch,
       (extract(epoch FROM lease_expires_at) * 1000000)::bigint
FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s
FOR SHARE;

-- name: call_intent
-- params: run_ref, key, step, request, digest, writer, epoch, now
-- returns: written
INSERT INTO safepoint_calls (run_ref, key, step, state, request, digest, writer, epoch, created_at)
VALUES (%(run_ref)s::bigint, %(key)s, %(step)s::bigint, 'intent', %(request)s::bytea, %(digest)s::bytea,
        %(writer)s::text, %(epoch)s::bigint,
        'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond')
ON CONFLICT (run_ref, key) DO NOTHING
RETURNING 1;

-- name: call_done
-- params: run_ref, key, step, request, result, digest, blobs, writer, epoch, now
-- returns: step, writer, epoch, created_at, same_request
INSERT INTO safepoint_calls AS c (
    run_ref, key, step, state, request, result, digest, blobs, writer, epoch, created_at, done_at
) VALUES (
    %(run_ref)s::bigint, %(key)s, %(step)s::bigint, 'done', %(request)s::bytea, %(result)s::bytea,
    %(digest)s::bytea, %(blobs)s::jsonb, %(writer)s::text, %(epoch)s::bigint,
    'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond',
    'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond')
ON CONFLICT (run_ref, key) DO UPDATE
SET state = 'done', result = excluded.result, digest = excluded.digest, blobs = excluded.blobs,
    done_at = excluded.done_at
WHERE c.state = 'intent' AND c.step = excluded.step
RETURNING c.step, c.writer, c.epoch, (extract(epoch FROM c.created_at) * 1000000)::bigint,
          c.request = %(request)s::bytea;

-- name: call_get
-- params: run_id, key, request, now
-- returns: key, step, state, result, blobs, digest, writer, epoch, writer_live, same_request,
--          created_at, done_at
SELECT c.key, c.step, c.state, c.result, c.blobs::text, c.digest, c.writer, c.epoch,
       coalesce(c.writer = r.lease_owner AND c.epoch = r.lease_epoch
                AND r.lease_expires_at > 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond',
                false),
       c.request = %(request)s::bytea,
       (extract(epoch FROM c.created_at) * 1000000)::bigint,
       (extract(epoch FROM c.done_at) * 1000000)::bigint
FROM safepoint_runs AS r
JOIN safepoint_calls AS c ON c.run_ref = r.id AND c.key = %(key)s
WHERE r.tenant = current_setting('safepoint.tenant') AND r.run_id = %(run_id)s;

-- name: calls_of_run
-- params: run_id, step
-- returns: key, step, state, result, blobs, digest, writer, epoch, created_at, done_at
SELECT c.key, c.step, c.state, c.result, c.blobs::text, c.digest, c.writer, c.epoch,
       (extract(epoch FROM c.created_at) * 1000000)::bigint,
       (extract(epoch FROM c.done_at) * 1000000)::bigint
FROM safepoint_runs AS r
JOIN safepoint_calls AS c ON c.run_ref = r.id
WHERE r.tenant = current_setting('safepoint.tenant') AND r.run_id = %(run_id)s AND (%(step)s::bigint IS NULL OR c.step = %(step)s::bigint)
ORDER BY c.step, c.created_at, c.key;

-- name: delete_calls
-- params: run_ref
-- returns: nothing
DELETE FROM safepoint_calls WHERE run_ref = %(run_ref)s::bigint;

-- name: delete_calls_of_step
-- params: run_ref, step
-- returns: nothing
DELETE FROM safepoint_calls WHERE run_ref = %(run_ref)s::bigint AND step = %(step)s::bigint;

-- name: sealed_calls
-- params: run_ref
-- returns: key, step, result, request, digest
SELECT key, step, result, request, digest FROM safepoint_calls
WHERE run_ref = %(run_ref)s::bigint ORDER BY key;

-- name: reseal_call
-- params: run_ref, key, result, request, digest
-- returns: nothing
UPDATE safepoint_calls SET result = %(result)s::bytea, request = %(request)s::bytea, digest = %(digest)s::bytea
WHERE run_ref = %(run_ref)s::bigint AND key = %(key)s;

-- The call journal as stored: verify, export and import (see the SQLite queries).

-- name: calls_stored
-- params: run_id
-- returns: key, step, state, request, result, blobs, digest, created_at, done_at
SELECT c.key, c.step, c.state, c.request, c.result, c.blobs::text, c.digest,
       (extract(epoch FROM c.created_at) * 1000000)::bigint,
       (extract(epoch FROM c.done_at) * 1000000)::bigint
FROM safepoint_runs AS r
JOIN safepoint_calls AS c ON c.run_ref = r.id
WHERE r.tenant = current_setting('safepoint.tenant') AND r.run_id = %(run_id)s
ORDER BY c.step, c.created_at, c.key;

-- name: call_import
-- params: run_ref, key, step, state, request, result, digest, blobs, created_at, done_at
-- returns: written
INSERT INTO safepoint_calls (
    run_ref, key, step, state, request, result, digest, blobs, created_at, done_at
) VALUES (
    %(run_ref)s::bigint, %(key)s, %(step)s::bigint, %(state)s, %(request)s::bytea, %(result)s::bytea,
    %(digest)s::bytea, %(blobs)s::jsonb,
    'epoch'::timestamptz + %(created_at)s::bigint * interval '1 microsecond',
    'epoch'::timestamptz + %(done_at)s::bigint * interval '1 microsecond')
ON CONFLICT (run_ref, key) DO NOTHING
RETURNING 1;

-- name: calls_covered
-- params: run_id
-- returns: step, calls
SELECT c.step, c.calls
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c ON c.run_ref = r.id
WHERE r.tenant = current_setting('safepoint.tenant') AND r.run_id = %(run_id)s AND NOT c.pruned
ORDER BY c.step;

-- name: call_recount
-- params: run_ref, step
-- returns: nothing
UPDATE safepoint_checkpoints
SET calls = (SELECT count(*) FROM safepoint_calls
             WHERE run_ref = %(run_ref)s::bigint AND step = %(step)s::bigint)
WHERE run_ref = %(run_ref)s::bigint AND step = %(step)s::bigint AND NOT pruned;

-- Redaction (store/ops/redacting.py; see the SQLite queries).

-- name: redaction_rows
-- params: run_ref
-- returns: step, header, digest, messages, chains, first_seq, added, ranges, pruned, blobs
SELECT step, header, digest, messages, chains, first_seq, added, ranges::text, pruned, blobs::text
FROM safepoint_checkpoints
WHERE run_ref = %(run_ref)s::bigint ORDER BY step;

-- name: redact_row
-- params: run_ref, step, header, digest, messages, chains, blobs
-- returns: nothing
UPDATE safepoint_checkpoints
SET header = %(header)s::bytea, digest = %(digest)s::bytea, messages = %(messages)s::bytea,
    chains = %(chains)s::bytea, blobs = %(blobs)s::jsonb
WHERE run_ref = %(run_ref)s::bigint AND step = %(step)s::bigint;

-- name: redaction_calls
-- params: run_ref
-- returns: key, step, result, blobs
SELECT key, step, result, blobs::text FROM safepoint_calls
WHERE run_ref = %(run_ref)s::bigint ORDER BY key;

-- name: redact_call
-- params: run_ref, key, result, digest, blobs
-- returns: nothing
UPDATE safepoint_calls
SET result = %(result)s::bytea, digest = %(digest)s::bytea, blobs = %(blobs)s::jsonb
WHERE run_ref = %(run_ref)s::bigint AND key = %(key)s;

-- name: redaction_record
-- params: run_ref, redaction_id
-- returns: record
SELECT record FROM safepoint_redactions
WHERE run_ref = %(run_ref)s::bigint AND redaction_id = %(redaction_id)s;

-- name: put_redaction_record
-- params: run_ref, redaction_id, head_step, now, record, mac
-- returns: nothing
INSERT INTO safepoint_redactions (run_ref, redaction_id, head_step, created_at, record, mac)
VALUES (%(run_ref)s::bigint, %(redaction_id)s, %(head_step)s::bigint,
        'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond', %(record)s, %(mac)s::bytea)
ON CONFLICT (run_ref, redaction_id) DO UPDATE
SET head_step = excluded.head_step, record = excluded.record, mac = excluded.mac;

-- name: key_redaction_record
-- params: run_ref, redaction_id, mac
-- returns: nothing
-- A record written on a plain store gets its check value keyed when the store is encrypted.
UPDATE safepoint_redactions SET mac = %(mac)s::bytea
WHERE run_ref = %(run_ref)s::bigint AND redaction_id = %(redaction_id)s;

-- name: redaction_records
-- params: run_id
-- returns: redaction_id, created_at, record, mac
SELECT d.redaction_id, (extract(epoch FROM d.created_at) * 1000000)::bigint, d.record, d.mac
FROM safepoint_runs AS r
JOIN safepoint_redactions AS d ON d.run_ref = r.id
WHERE r.tenant = current_setting('safepoint.tenant') AND r.run_id = %(run_id)s
ORDER BY d.created_at, d.redaction_id;

-- name: redacted_head
-- params: run_ref
-- returns: head_step
SELECT max(head_step) FROM safepoint_redactions WHERE run_ref = %(run_ref)s::bigint;

-- name: delete_redactions
-- params: run_ref
-- returns: nothing
DELETE FROM safepoint_redactions WHERE run_ref = %(run_ref)s::bigint;

-- name: forks_all
-- params: run_id
-- returns: run_ref, run_id
SELECT id, run_id FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant') AND parent_run_id = %(run_id)s ORDER BY id;

-- name: run_ref_of
-- params: run_id
-- returns: run_ref
SELECT id FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s;

-- name: redaction_seen
-- params: redaction_id
-- returns: runs
SELECT count(*) FROM safepoint_redactions WHERE tenant = current_setting('safepoint.tenant') AND redaction_id = %(redaction_id)s;

-- name: redaction_runs_of
-- params: run_refs
-- returns: run_ref, labels, counters, last_error, head_digest
SELECT id, labels::text, counters::text, last_error, head_digest FROM safepoint_runs
WHERE tenant = current_setting('safepoint.tenant') AND id IN (SELECT jsonb_array_elements_text(%(run_refs)s::jsonb)::bigint);

-- name: redaction_rows_of
-- params: run_refs
-- returns: run_ref, step, header, digest, messages, chains, first_seq, added, ranges, pruned, blobs
SELECT run_ref, step, header, digest, messages, chains, first_seq, added, ranges::text, pruned,
       blobs::text
FROM safepoint_checkpoints
WHERE tenant = current_setting('safepoint.tenant') AND run_ref IN (SELECT jsonb_array_elements_text(%(run_refs)s::jsonb)::bigint)
ORDER BY run_ref, step;

-- name: redaction_calls_of
-- params: run_refs
-- returns: run_ref, key, step, result, blobs
SELECT run_ref, key, step, result, blobs::text FROM safepoint_calls
WHERE tenant = current_setting('safepoint.tenant') AND run_ref IN (SELECT jsonb_array_elements_text(%(run_refs)s::jsonb)::bigint)
ORDER BY run_ref, key;

-- name: tenant_held
-- params: none
-- returns: runs, checkpoints, blobs, meta, data_keys, calls, redactions
-- What the tenant holds, per table (safepoint tenant erase).
SELECT (SELECT count(*) FROM safepoint_runs WHERE tenant = current_setting('safepoint.tenant')),
       (SELECT count(*) FROM safepoint_checkpoints WHERE tenant = current_setting('safepoint.tenant')),
       (SELECT count(*) FROM safepoint_blobs WHERE tenant = current_setting('safepoint.tenant')),
       (SELECT count(*) FROM safepoint_meta WHERE tenant = current_setting('safepoint.tenant')),
       (SELECT count(*) FROM safepoint_data_keys WHERE tenant = current_setting('safepoint.tenant')),
       (SELECT count(*) FROM safepoint_calls WHERE tenant = current_setting('safepoint.tenant')),
       (SELECT count(*) FROM safepoint_redactions WHERE tenant = current_setting('safepoint.tenant'));

-- name: erase_data_keys
-- params: none
-- returns: key_id
-- The tenant's data keys deleted: the first step of an erase (crypto-erasure).
DELETE FROM safepoint_data_keys WHERE tenant = current_setting('safepoint.tenant') RETURNING key_id;

-- name: erase_blobs
-- params: limit
-- returns: digest
-- A page of the tenant's database blob rows deleted.
DELETE FROM safepoint_blobs
WHERE tenant = current_setting('safepoint.tenant')
  AND digest IN (SELECT digest FROM safepoint_blobs WHERE tenant = current_setting('safepoint.tenant')
                 ORDER BY digest LIMIT %(limit)s::bigint)
RETURNING digest;

-- name: erase_meta
-- params: none
-- returns: name
-- The tenant's meta rows deleted: the last step of an erase.
DELETE FROM safepoint_meta WHERE tenant = current_setting('safepoint.tenant') RETURNING name;

-- name: tenant_names
-- params: none
-- returns: tenant
-- optional: yes
-- Every tenant the store holds rows of: the operator view (tenant_listing.py),
-- asked only once sees_every_tenant said row-level security does not bind
-- the role (else it would list the transaction's own tenant alone). No
-- tenant filter, on purpose.
SELECT tenant FROM safepoint_runs UNION SELECT tenant FROM safepoint_meta ORDER BY 1;

-- name: sees_every_tenant
-- params: none
-- returns: sees
-- optional: yes
-- Whether the connected role passes row-level security (a superuser, or a
-- role with BYPASSRLS: the operator role of docs/tenants.md).
SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user;
