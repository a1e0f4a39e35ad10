-- Named queries for the SQLite backend. Each block starts with "-- name: x".
-- Parameters are named (:param); the Python side never builds SQL text.
--
-- Writes run inside BEGIN IMMEDIATE, which takes SQLite's single write lock
-- up front: a read-then-write transaction can then never fail half way with
-- SQLITE_BUSY, and the "is this the next step?" check cannot race. (That is
-- also why SQLite needs no SKIP LOCKED: there is only ever one writer.)
--
-- A run's checkpoints live at ids run_ref * 2^32 + step (see the DDL); its
-- head is the highest of them: a rightmost-key lookup, O(log n).

-- name: run_head
-- params: run_id, labels
-- returns: next_seq, run_ref, head_step, head_digest, status, lease_owner, lease_epoch,
--          lease_expires_at, needs_advance
-- Always one row: the run's next free message seq, then the run (NULLs if
-- new). Seqs only grow, so the head's first_seq + added is the next one.
-- status is NULL while a status_change is recorded (revision 7): the save
-- then sets its own status and clears the record (set_run_status).
SELECT coalesce(c.first_seq + c.added, 0),
       r.id, c.step, c.digest, CASE WHEN r.status_change IS NULL THEN r.status END,
       r.lease_owner, r.lease_epoch, r.lease_expires_at,
       r.labels IS NOT :labels  -- advance_run is needed only when labels change
FROM (SELECT 1)
LEFT JOIN safepoint_runs AS r ON r.run_id = :run_id
LEFT JOIN safepoint_checkpoints AS c ON c.id = (
    SELECT max(id) FROM safepoint_checkpoints
    WHERE id BETWEEN r.id * 4294967296 AND r.id * 4294967296 + 4294967295);

-- name: insert_run
-- params: run_id, status, step, digest, schema_version, labels, counters, parent_run_id,
--         parent_step, next_seq, now
-- returns: run_ref
INSERT INTO safepoint_runs (run_id, status, labels, parent_run_id, parent_step, created_at)
VALUES (:run_id, :status, :labels, :parent_run_id, :parent_step, :now)
ON CONFLICT (run_id) DO NOTHING
RETURNING id;

-- name: advance_run
-- params: run_ref, step, digest, schema_version, labels, counters, next_seq, now
-- returns: nothing
-- The head moves by the checkpoint insert alone; the run row is written only
-- when its labels change (an UPDATE that matches no row writes no page).
-- status is handled by set_run_status, also only when it changes.
UPDATE safepoint_runs SET labels = :labels
WHERE id = :run_ref AND labels IS NOT :labels;

-- name: set_run_status
-- params: run_ref, status
-- returns: nothing
-- A save's status is its checkpoint's: any record of a change made without
-- a checkpoint no longer applies.
UPDATE safepoint_runs SET status = :status, status_change = NULL WHERE id = :run_ref;

-- name: insert_checkpoint
-- params: run_ref, step, schema_version, status, now, message_count, ranges, header,
--         digest, first_seq, added, messages, blobs, carriers, chains
-- returns: nothing
INSERT INTO safepoint_checkpoints (
    id, run_ref, step, schema_version, status, created_at, message_count, ranges, header, digest,
    first_seq, added, messages, blobs, carriers, chains, calls
) VALUES (
    :run_ref * 4294967296 + :step, :run_ref, :step, :schema_version, :status, :now,
    :message_count, :ranges, :header, :digest, :first_seq, :added, :messages, :blobs, :carriers, :chains,
    (SELECT count(*) FROM safepoint_calls WHERE run_ref = :run_ref AND step = :step)  -- entries it covers
);

-- name: checkpoint_latest
-- params: run_id
-- returns: run_ref, step, ranges, header, digest, head_step, head_digest, last_step, carriers
-- The last three columns are the run's head as the run row records it (step,
-- digest) and its highest stored step, which ops checks against each other
-- (see the PostgreSQL query). Here the head is the highest row, so they are
-- that row's own: a head row deleted cleanly cannot be told from saves that
-- never happened (docs/operations.md, "Damaged data").
SELECT r.id, c.step, c.ranges, c.header, c.digest, c.step, c.digest, c.step, c.carriers
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c ON c.id = (
    SELECT max(id) FROM safepoint_checkpoints
    WHERE id BETWEEN r.id * 4294967296 AND r.id * 4294967296 + 4294967295)
WHERE r.run_id = :run_id;

-- name: checkpoint_at
-- params: run_id, step
-- returns: run_ref, step, ranges, header, digest, carriers
SELECT r.id, c.step, c.ranges, c.header, c.digest, c.carriers
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c ON c.id = r.id * 4294967296 + :step AND c.pruned = 0
WHERE r.run_id = :run_id;

-- name: view_span
-- params: run_ref, first_step, last_step, span_start, span_end
-- returns: step, first_seq, added, messages
-- view_carriers for a checkpoint of one range (an appending run's, the
-- usual load): one primary-key range scan with plain parameters, where the
-- IN list of view_carriers builds a temporary index and looks each row up
-- in it again (a 1,000-row load: about 3 ms less).
SELECT c.step, c.first_seq, c.added, c.messages
FROM safepoint_checkpoints AS c
WHERE c.id BETWEEN :run_ref * 4294967296 + :first_step AND :run_ref * 4294967296 + :last_step
  AND c.added > 0 AND c.first_seq < :span_end AND c.first_seq + c.added > :span_start
ORDER BY c.id;

-- name: view_carriers
-- params: run_ref, spans
-- returns: step, first_seq, added, messages
-- The rows that added the messages a checkpoint sees, in log order, found
-- by primary key: spans holds, for each range, [first_step, last_step,
-- start, end] (the carriers column beside the range's seqs), so each range
-- costs one short range scan, whatever the run's length. The IN list reads
-- a row two ranges share once; a row whose seqs miss its range (the last
-- step of a range cut short) is skipped without reading its messages.
SELECT c.step, c.first_seq, c.added, c.messages
FROM safepoint_checkpoints AS c
WHERE c.id IN (
    SELECT k.id
    FROM json_each(:spans) AS s
    JOIN safepoint_checkpoints AS k
      ON k.id BETWEEN :run_ref * 4294967296 + (s.value ->> 0)
                  AND :run_ref * 4294967296 + (s.value ->> 1)
    WHERE k.added > 0 AND k.first_seq < s.value ->> 3 AND k.first_seq + k.added > s.value ->> 2)
ORDER BY c.id;

-- name: view_chains
-- params: run_ref, spans
-- returns: step, first_seq, chains
-- view_carriers without the messages: the chain values of the rows that
-- carry a checkpoint's messages, for a save that compares with the head
-- without reading its bodies.
SELECT c.step, c.first_seq, c.chains
FROM safepoint_checkpoints AS c
WHERE c.id IN (
    SELECT k.id
    FROM json_each(:spans) AS s
    JOIN safepoint_checkpoints AS k
      ON k.id BETWEEN :run_ref * 4294967296 + (s.value ->> 0)
                  AND :run_ref * 4294967296 + (s.value ->> 1)
    WHERE k.added > 0 AND k.first_seq < s.value ->> 3 AND k.first_seq + k.added > s.value ->> 2)
ORDER BY c.id;

-- name: view_messages
-- params: run_ref, ranges
-- returns: step, first_seq, added, messages
-- What view_carriers does for a checkpoint written before the carriers
-- column (revision 5): every row of the run is tested against every range,
-- in one query. Only these rows' messages are read (SQLite reads a row's
-- large value only when it is selected).
SELECT c.step, c.first_seq, c.added, c.messages
FROM safepoint_checkpoints AS c
WHERE c.id BETWEEN :run_ref * 4294967296 AND :run_ref * 4294967296 + 4294967295
  AND c.added > 0
  AND EXISTS (
      SELECT 1 FROM json_each(:ranges) AS r
      WHERE c.first_seq < r.value ->> 1 AND c.first_seq + c.added > r.value ->> 0)
ORDER BY c.id;

-- name: history
-- params: run_id
-- returns: step, schema_version, status, created_at, message_count, digest
SELECT c.step, c.schema_version, c.status, c.created_at, c.message_count, c.digest
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c
  ON c.id BETWEEN r.id * 4294967296 AND r.id * 4294967296 + 4294967295
WHERE r.run_id = :run_id AND c.pruned = 0
ORDER BY c.id;

-- name: forks_of
-- params: run_id
-- returns: run_id, parent_step
-- The runs forked from a run (the inspector's run page), oldest first, a page of them.
SELECT run_id, parent_step FROM safepoint_runs WHERE parent_run_id = :run_id ORDER BY id LIMIT 100;

-- name: timeline
-- params: run_id
-- returns: step, created_at, message_count, header, stored_bytes
-- What the inspector charts (safepoint.ui): each checkpoint's counters (in its
-- header) and the bytes its row stores, without a message body.
SELECT c.step, c.created_at, c.message_count, c.header,
       length(c.header) + coalesce(length(c.messages), 0) + coalesce(length(c.chains), 0)
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c
  ON c.id BETWEEN r.id * 4294967296 AND r.id * 4294967296 + 4294967295
WHERE r.run_id = :run_id AND c.pruned = 0
ORDER BY c.id;

-- name: run_exists
-- params: run_id
-- returns: run_ref
SELECT id FROM safepoint_runs WHERE run_id = :run_id;

-- name: run_info
-- params: run_id
-- returns: run_ref, run_id, status, head_step, schema_version, labels, counters,
--          created_at, updated_at, parent_run_id, parent_step, attempts, retry_at,
--          last_error
SELECT r.id, r.run_id, r.status, c.step, c.schema_version, r.labels,
       -- a sealed header (encrypted store) is returned whole: the store opens it
       CASE WHEN substr(c.header, 1, 1) = x'00' THEN c.header
            ELSE json_extract(CAST(c.header AS TEXT), '$.counters') END,
       r.created_at, c.created_at, r.parent_run_id, r.parent_step,
       r.attempts, r.retry_at, r.last_error
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c ON c.id = (
    SELECT max(id) FROM safepoint_checkpoints
    WHERE id BETWEEN r.id * 4294967296 AND r.id * 4294967296 + 4294967295)
WHERE r.run_id = :run_id;

-- name: list_runs
-- params: statuses, labels, updated_since, updated_until, before_id, prefix, limit
-- returns: run_ref, run_id, status, head_step, schema_version, labels, counters,
--          created_at, updated_at, parent_run_id, parent_step, attempts, retry_at,
--          last_error
-- Newest first, paged by the run's row id (stable while runs are updated).
-- Filters are optional: a NULL parameter switches its filter off. Labels
-- match when every wanted key/value pair is among the run's labels.
SELECT r.id, r.run_id, r.status, c.step, c.schema_version, r.labels,
       -- a sealed header (encrypted store) is returned whole: the store opens it
       CASE WHEN substr(c.header, 1, 1) = x'00' THEN c.header
            ELSE json_extract(CAST(c.header AS TEXT), '$.counters') END,
       r.created_at, c.created_at, r.parent_run_id, r.parent_step,
       r.attempts, r.retry_at, r.last_error
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c ON c.id = (
    SELECT max(id) FROM safepoint_checkpoints
    WHERE id BETWEEN r.id * 4294967296 AND r.id * 4294967296 + 4294967295)
WHERE (:statuses IS NULL OR r.status IN (SELECT value FROM json_each(:statuses)))
  AND (:updated_since IS NULL OR c.created_at >= :updated_since)
  AND (:updated_until IS NULL OR c.created_at <= :updated_until)
  AND (:before_id IS NULL OR r.id < :before_id)
  AND (:prefix IS NULL OR substr(r.run_id, 1, length(:prefix)) = :prefix)  -- no LIKE: % and _ are data
  AND (:labels IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(:labels) AS want
        WHERE NOT EXISTS (
            SELECT 1 FROM json_each(r.labels) AS have
            WHERE have.key = want.key AND have.value = want.value)))
ORDER BY r.id DESC
LIMIT :limit;

-- name: run_counters
-- params: statuses, labels, hidden, updated_since, updated_until
-- returns: run_id, head_step, updated_at, counters
-- Each run's head counters and last update, for sums (safepoint.totals):
-- list_runs' filters without its page or its other columns, in one query.
-- :hidden is a JSON list of label sets: a run holding every pair of any of
-- them (an adapter's bookkeeping) is left out.
SELECT r.run_id, c.step, c.created_at,
       -- a sealed header (encrypted store) is returned whole: the store opens it
       CASE WHEN substr(c.header, 1, 1) = x'00' THEN c.header
            ELSE json_extract(CAST(c.header AS TEXT), '$.counters') END
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c ON c.id = (
    SELECT max(id) FROM safepoint_checkpoints
    WHERE id BETWEEN r.id * 4294967296 AND r.id * 4294967296 + 4294967295)
WHERE (:statuses IS NULL OR r.status IN (SELECT value FROM json_each(:statuses)))
  AND (:updated_since IS NULL OR c.created_at >= :updated_since)
  AND (:updated_until IS NULL OR c.created_at <= :updated_until)
  AND (:labels IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(:labels) AS want
        WHERE NOT EXISTS (
            SELECT 1 FROM json_each(r.labels) AS have
            WHERE have.key = want.key AND have.value = want.value)))
  AND (:hidden IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(:hidden) AS rule
        WHERE NOT EXISTS (
            SELECT 1 FROM json_each(rule.value) AS want
            WHERE NOT EXISTS (
                SELECT 1 FROM json_each(r.labels) AS have
                WHERE have.key = want.key AND have.value = want.value))));

-- name: list_runs_sorted
-- params: statuses, labels, updated_since, updated_until, prefix, sort, descending,
--         after_text, after_number, after_id, limit
-- returns: run_ref, run_id, status, head_step, schema_version, labels, counters,
--          created_at, updated_at, parent_run_id, parent_step, attempts, retry_at,
--          last_error
-- list_runs' runs and filters in another order: :sort names the key (run_id
-- and status as text, updated and step as numbers, created: the row id
-- alone), the row id breaks ties. Paged by the last row's key: rows after
-- (:after_text, :after_number, :after_id) in the order asked, so a run is
-- listed once however many share its key. The unused key is a constant ('' or
-- 0) on both sides. No index serves it: the filtered runs are sorted whole,
-- by their keys alone; the page's rows are read after (counters, labels).
WITH keyed AS (
    SELECT r.id AS run_ref, c.id AS head_id,
           CASE :sort WHEN 'run_id' THEN r.run_id WHEN 'status' THEN r.status ELSE '' END AS text_key,
           CASE :sort WHEN 'updated' THEN c.created_at WHEN 'step' THEN c.step ELSE 0 END AS number_key
    FROM safepoint_runs AS r
    JOIN safepoint_checkpoints AS c ON c.id = (
        SELECT max(id) FROM safepoint_checkpoints
        WHERE id BETWEEN r.id * 4294967296 AND r.id * 4294967296 + 4294967295)
    WHERE (:statuses IS NULL OR r.status IN (SELECT value FROM json_each(:statuses)))
      AND (:updated_since IS NULL OR c.created_at >= :updated_since)
      AND (:updated_until IS NULL OR c.created_at <= :updated_until)
      AND (:prefix IS NULL OR substr(r.run_id, 1, length(:prefix)) = :prefix)  -- no LIKE: % and _ are data
      AND (:labels IS NULL OR NOT EXISTS (
            SELECT 1 FROM json_each(:labels) AS want
            WHERE NOT EXISTS (
                SELECT 1 FROM json_each(r.labels) AS have
                WHERE have.key = want.key AND have.value = want.value)))
),
page AS (
    SELECT * FROM keyed
    WHERE :after_id IS NULL
       OR (:descending AND (text_key, number_key, run_ref) < (:after_text, :after_number, :after_id))
       OR (NOT :descending AND (text_key, number_key, run_ref) > (:after_text, :after_number, :after_id))
    -- One ORDER BY for both ways: the terms of the way not asked are NULL on every row.
    ORDER BY CASE WHEN :descending THEN text_key END DESC,
             CASE WHEN :descending THEN number_key END DESC,
             CASE WHEN :descending THEN run_ref END DESC,
             text_key, number_key, run_ref
    LIMIT :limit
)
SELECT r.id, r.run_id, r.status, c.step, c.schema_version, r.labels,
       -- a sealed header (encrypted store) is returned whole: the store opens it
       CASE WHEN substr(c.header, 1, 1) = x'00' THEN c.header
            ELSE json_extract(CAST(c.header AS TEXT), '$.counters') END,
       r.created_at, c.created_at, r.parent_run_id, r.parent_step,
       r.attempts, r.retry_at, r.last_error
FROM page
JOIN safepoint_runs AS r ON r.id = page.run_ref
JOIN safepoint_checkpoints AS c ON c.id = page.head_id
ORDER BY CASE WHEN :descending THEN page.text_key END DESC,
         CASE WHEN :descending THEN page.number_key END DESC,
         CASE WHEN :descending THEN page.run_ref END DESC,
         page.text_key, page.number_key, page.run_ref;

-- name: delete_checkpoints
-- params: run_ref
-- returns: nothing
DELETE FROM safepoint_checkpoints
WHERE id BETWEEN :run_ref * 4294967296 AND :run_ref * 4294967296 + 4294967295;

-- name: delete_run
-- params: run_ref
-- returns: nothing
DELETE FROM safepoint_runs WHERE id = :run_ref;

-- name: enqueue
-- params: run_id, now
-- returns: run_ref
-- ends: transaction
UPDATE safepoint_runs SET queued_at = coalesce(queued_at, :now)
WHERE run_id = :run_id
RETURNING id;

-- name: claim
-- params: worker_id, now, expires_at, max_version, held_limit
-- returns: run_id, epoch, expires_at, attempts, status
-- ends: transaction
-- One statement: take the oldest queued run whose lease is free or expired
-- and whose retry_at (after a failed attempt) has come, bump its epoch and
-- count the attempt. Counted here, at claim, so that a handler that kills
-- its own process still uses up its attempts. SQLite needs no SKIP LOCKED:
-- BEGIN IMMEDIATE already makes claimers take turns, so two can never pick
-- the same run.
-- A run whose head checkpoint is newer than :max_version (the claimer's
-- schema version) is left for newer code: the claimer could not load it,
-- and putting it back would only let it claim the same run again. The head's
-- schema_version is read by the rightmost-key lookup run_head uses (no run
-- row column: a claim costs about the same either way, ~20 us, and saves keep
-- the run row alone; skipping a too-new run costs ~0.8 us, measured with
-- 10,000 queued). A run with no checkpoint row stays claimable (its load
-- says what is wrong). The row's status comes back with the lease: a worker's
-- Run starts from it instead of reading the row again (a quarantined run
-- queued again with enqueue stays failed).
UPDATE safepoint_runs
SET lease_owner = :worker_id, lease_epoch = lease_epoch + 1, lease_expires_at = :expires_at,
    attempts = attempts + 1, retry_at = NULL
WHERE id = (
    SELECT r.id FROM safepoint_runs AS r
    WHERE r.queued_at IS NOT NULL AND (r.lease_owner IS NULL OR r.lease_expires_at <= :now)
      AND (r.retry_at IS NULL OR r.retry_at <= :now)
      AND coalesce((SELECT c.schema_version FROM safepoint_checkpoints AS c
                    WHERE c.id BETWEEN r.id * 4294967296 AND r.id * 4294967296 + 4294967295
                    ORDER BY c.id DESC LIMIT 1), 0) <= :max_version
      AND (:held_limit IS NULL
           OR (SELECT count(*) FROM safepoint_runs
               WHERE lease_owner IS NOT NULL AND lease_expires_at > :now) < :held_limit)
    ORDER BY r.queued_at, r.id
    LIMIT 1)
RETURNING run_id, lease_epoch, lease_expires_at, attempts, status;

-- name: queue_depth
-- params: now
-- returns: depth
-- How many runs a claim could take now (the claim's WHERE clause): the
-- safepoint.queue.depth gauge, and Store.queue_depth for operators.
SELECT count(*) FROM safepoint_runs
WHERE queued_at IS NOT NULL AND (lease_owner IS NULL OR lease_expires_at <= :now)
  AND (retry_at IS NULL OR retry_at <= :now);

-- name: run_counts
-- params: now, soon
-- returns: status, runs, queued, leased, expiring
-- Runs by status, with how many are queued, leased (a live lease) and leased
-- with the lease running out before :soon: the inspector's overview.
SELECT status, count(*), coalesce(sum(queued_at IS NOT NULL), 0),
       coalesce(sum(lease_owner IS NOT NULL AND lease_expires_at > :now), 0),
       coalesce(sum(lease_owner IS NOT NULL AND lease_expires_at > :now AND lease_expires_at <= :soon), 0)
FROM safepoint_runs GROUP BY status ORDER BY status;

-- name: heartbeat
-- params: run_id, worker_id, epoch, expires_at
-- returns: expires_at
-- ends: transaction
UPDATE safepoint_runs SET lease_expires_at = :expires_at
WHERE run_id = :run_id AND lease_owner = :worker_id AND lease_epoch = :epoch
RETURNING lease_expires_at;

-- name: release
-- params: run_id, worker_id, epoch, status, requeue, now, attempts, retry_at, error
-- returns: run_ref
-- ends: transaction
-- The epoch stays: it only ever grows, so an old lease can never match again.
-- :attempts says what happens to the count: 'keep', 'reset' (a clean
-- outcome) or 'uncount' (the attempt was not the run's fault: a too-new
-- schema_version, an unavailable store, a stop). :retry_at and :error
-- record a failed attempt (NULL otherwise). A status set here is recorded
-- in status_change (revision 7), under the lease's epoch.
UPDATE safepoint_runs
SET lease_owner = NULL, lease_expires_at = NULL,
    queued_at = CASE WHEN :requeue THEN coalesce(queued_at, :now) ELSE NULL END,
    status = coalesce(:status, status),
    status_change = CASE WHEN :status IS NULL THEN status_change
                         ELSE json_object('by', 'release', 'status', :status, 'epoch', :epoch) END,
    attempts = CASE :attempts WHEN 'reset' THEN 0
                              WHEN 'uncount' THEN max(attempts - 1, 0)
                              ELSE attempts END,
    retry_at = :retry_at,
    last_error = CASE WHEN :attempts = 'reset' THEN NULL ELSE coalesce(:error, last_error) END
WHERE run_id = :run_id AND lease_owner = :worker_id AND lease_epoch = :epoch
RETURNING id;

-- name: requeue
-- params: run_id, now
-- returns: run_ref
-- Back in the queue with a clean slate of attempts (a quarantined run is
-- failed: it runs again). The last error stays readable until an attempt
-- succeeds. A live lease is left alone: its holder's release decides.
UPDATE safepoint_runs
SET queued_at = coalesce(queued_at, :now), attempts = 0, retry_at = NULL,
    status = CASE WHEN status = 'failed' THEN 'running' ELSE status END,
    status_change = CASE WHEN status = 'failed'
                         THEN json_object('by', 'requeue', 'status', 'running', 'epoch', lease_epoch)
                         ELSE status_change END
WHERE run_id = :run_id
RETURNING id;

-- name: next_claimable
-- params: max_version
-- returns: at
-- When the next queued run the caller could claim can be claimed: the later
-- of its lease expiry and its retry_at (0 if both are unset), earliest first;
-- NULL if none is queued. Runs newer than :max_version are not counted (see
-- claim): a worker draining the queue stops instead of waiting for them.
SELECT min(max(coalesce(r.lease_expires_at, 0), coalesce(r.retry_at, 0)))
FROM safepoint_runs AS r
WHERE r.queued_at IS NOT NULL
  AND coalesce((SELECT c.schema_version FROM safepoint_checkpoints AS c
                WHERE c.id BETWEEN r.id * 4294967296 AND r.id * 4294967296 + 4294967295
                ORDER BY c.id DESC LIMIT 1), 0) <= :max_version;

-- name: queued_too_new
-- params: max_version
-- returns: runs
-- How many queued runs are newer than :max_version, which a claim with it
-- leaves alone: the safepoint.queue.too_new gauge of an old worker.
SELECT count(*)
FROM safepoint_runs AS r
WHERE r.queued_at IS NOT NULL
  AND (SELECT c.schema_version FROM safepoint_checkpoints AS c
       WHERE c.id BETWEEN r.id * 4294967296 AND r.id * 4294967296 + 4294967295
       ORDER BY c.id DESC LIMIT 1) > :max_version;

-- name: lease_state
-- params: run_id
-- returns: owner, epoch
SELECT lease_owner, lease_epoch FROM safepoint_runs WHERE run_id = :run_id;

-- name: hold_run
-- params: run_id, owner, now, expires_at, take_from
-- returns: epoch, expires_at
-- ends: transaction
-- One named run's lease, outside the queue (Run.open's exclusive hold): taken
-- when no live lease is on the run, or from :take_from, a holder the caller
-- found dead (its process gone). The epoch stays (it counts workers' claims):
-- a hold is fenced by its owner id, which no other live writer shares, and a
-- claim after it bumps the epoch as always. The queue, attempts and retry_at
-- are left alone, and a claim skips a held run as it skips any live lease.
UPDATE safepoint_runs SET lease_owner = :owner, lease_expires_at = :expires_at
WHERE run_id = :run_id
  AND (lease_owner IS NULL OR lease_expires_at <= :now OR lease_owner = :take_from)
RETURNING lease_epoch, lease_expires_at;

-- name: release_hold
-- params: run_id, owner, epoch
-- returns: run_ref
-- ends: transaction
-- Give a hold back: the lease only. Unlike release, the run keeps its place
-- in the queue (or stays out of it), its status and its attempts.
UPDATE safepoint_runs SET lease_owner = NULL, lease_expires_at = NULL
WHERE run_id = :run_id AND lease_owner = :owner AND lease_epoch = :epoch
RETURNING id;

-- name: head_messages
-- params: run_ref, step
-- returns: first_seq, added, messages, chains
-- The messages the head row carries (eager migration appends to them).
SELECT first_seq, added, messages, chains FROM safepoint_checkpoints
WHERE id = :run_ref * 4294967296 + :step;

-- name: rewrite_checkpoint
-- params: run_ref, step, schema_version, status, message_count, ranges, header, digest,
--         added, messages, carriers, chains
-- returns: nothing
-- Eager migration replaces the head checkpoint in place: the one exception to
-- "rows are never updated". The row keeps its step and creation time; any
-- message the migration changed is appended to the messages it carries under
-- new seqs, so older checkpoints still see exactly what they saw.
UPDATE safepoint_checkpoints
SET schema_version = :schema_version, status = :status, message_count = :message_count,
    ranges = :ranges, header = :header, digest = :digest, added = :added, messages = :messages,
    carriers = :carriers, chains = :chains
WHERE id = :run_ref * 4294967296 + :step;

-- name: rewrite_run_head
-- params: run_ref, digest, schema_version, labels, counters, next_seq, status
-- returns: nothing
UPDATE safepoint_runs SET labels = :labels, status = :status, status_change = NULL WHERE id = :run_ref;

-- name: blob_guard_shared
-- params: none
-- returns: held
-- Saves that reference blobs and garbage collection take turns on the blob
-- guard (see store/blob_targets.py). SQLite's write lock, taken by BEGIN
-- IMMEDIATE, already serializes them: nothing more to lock here.
SELECT 1;

-- name: blob_guard_exclusive
-- params: none
-- returns: held
SELECT 1;

-- name: insert_blobs
-- params: digest, size, now, data
-- returns: nothing
INSERT INTO safepoint_blobs (digest, size, created_at, data)
VALUES (:digest, :size, :now, :data)
ON CONFLICT (digest) DO NOTHING;

-- name: select_blobs
-- params: digests
-- returns: digest, data
SELECT digest, data FROM safepoint_blobs WHERE digest IN (SELECT value FROM json_each(:digests));

-- name: set_run_retention
-- params: run_id, retention
-- returns: run_ref
UPDATE safepoint_runs SET retention = :retention WHERE run_id = :run_id RETURNING id;

-- name: run_retention
-- params: run_id
-- returns: run_ref, retention, status, labels
SELECT id, retention, status, labels FROM safepoint_runs WHERE run_id = :run_id;

-- name: checkpoint_spans
-- params: run_ref
-- returns: step, created_at, first_seq, added, ranges, pruned, header_size, stored_size
-- What retention needs of every row of a run, oldest first: no headers, no
-- messages, only their sizes (what deleting the row frees, for the report).
SELECT step, created_at, first_seq, added, ranges, pruned, length(header),
       coalesce(length(messages), 0) + length(ranges) + coalesce(length(blobs), 0)
FROM safepoint_checkpoints
WHERE id BETWEEN :run_ref * 4294967296 AND :run_ref * 4294967296 + 4294967295
ORDER BY id;

-- name: carried_messages
-- params: run_ref, step
-- returns: messages
SELECT messages FROM safepoint_checkpoints WHERE id = :run_ref * 4294967296 + :step;

-- name: make_carrier
-- params: run_ref, step, blobs
-- returns: nothing
-- The checkpoint is gone; its row stays for the messages a kept checkpoint sees.
UPDATE safepoint_checkpoints
SET pruned = 1, header = x'', ranges = '[]', blobs = :blobs
WHERE id = :run_ref * 4294967296 + :step;

-- name: delete_checkpoint_row
-- params: run_ref, step
-- returns: nothing
DELETE FROM safepoint_checkpoints WHERE id = :run_ref * 4294967296 + :step;

-- name: referenced_blobs
-- params: none
-- returns: blobs
-- Every blob some row still references (garbage collection's mark phase).
SELECT blobs FROM safepoint_checkpoints WHERE blobs IS NOT NULL
UNION ALL SELECT blobs FROM safepoint_calls WHERE blobs IS NOT NULL;

-- name: stored_blobs
-- params: none
-- returns: digest, size, created_at
SELECT digest, length(data), created_at FROM safepoint_blobs;

-- name: delete_blobs
-- params: digest
-- returns: nothing
DELETE FROM safepoint_blobs WHERE digest = :digest;

-- name: status_origin
-- params: run_id
-- returns: status, epoch, status_change
-- The run row's status and the record of the change that set it without a
-- checkpoint, if any (safepoint verify: ops/listing.status_origin).
SELECT status, lease_epoch, status_change FROM safepoint_runs WHERE run_id = :run_id;

-- name: queue_state
-- params: run_id
-- returns: queued, owner, epoch, expires_at, status
-- Where a run stands with the workers (Store.queue_state), and the row's status.
SELECT queued_at IS NOT NULL, lease_owner, lease_epoch, lease_expires_at, status
FROM safepoint_runs WHERE run_id = :run_id;

-- name: queue_state_for_update
-- params: run_id
-- returns: queued, owner, epoch, expires_at, status
-- The same, before a write to the row (revoke_lease, cancel); BEGIN IMMEDIATE
-- already holds the write lock, so nothing more to lock here.
SELECT queued_at IS NOT NULL, lease_owner, lease_epoch, lease_expires_at, status
FROM safepoint_runs WHERE run_id = :run_id;

-- name: revoke_lease
-- params: run_id
-- returns: nothing
-- The holder is fenced: heartbeat, release and saves under its lease all
-- match on lease_owner, which is gone. The epoch stays (it only ever grows).
-- Out of the queue too, so that no worker claims the run before the
-- operator who revoked the lease is done with it.
UPDATE safepoint_runs SET lease_owner = NULL, lease_expires_at = NULL, queued_at = NULL
WHERE run_id = :run_id;

-- name: cancel_run
-- params: run_id
-- returns: nothing
-- Fenced and dequeued like revoke_lease, and cancelled on the row (the
-- cancelled checkpoint, when the head loads, follows in the same transaction
-- and clears the status_change recorded here).
UPDATE safepoint_runs
SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, queued_at = NULL,
    retry_at = NULL,
    status_change = json_object('by', 'cancel', 'status', 'cancelled', 'epoch', lease_epoch)
WHERE run_id = :run_id;

-- name: run_retention_read
-- params: run_id
-- returns: run_ref, retention, status, labels
-- run_retention for a dry run: read only, nothing locked.
SELECT id, retention, status, labels FROM safepoint_runs WHERE run_id = :run_id;

-- name: database_pages
-- params: none
-- returns: pages, free_pages, page_size, auto_vacuum
-- optional: yes
-- How big the file is and how much of it is free, in pages, and whether it
-- gives free pages back (auto_vacuum 2: incremental, how new stores are
-- created; 0: none, files created before that, until one full VACUUM).
SELECT page_count, freelist_count, page_size, auto_vacuum
FROM pragma_page_count(), pragma_freelist_count(), pragma_page_size(), pragma_auto_vacuum();

-- name: release_free_pages
-- params: none
-- returns: nothing
-- optional: yes
-- Moves pages from the end of the file into free pages and truncates it (in
-- an incremental auto-vacuum file; a no-op otherwise). Run once per free
-- page: Python's sqlite3 steps a statement without result columns once, and
-- each step of this pragma releases one page.
PRAGMA incremental_vacuum;

-- name: end_transaction
-- params: none
-- returns: nothing
-- optional: yes
-- A full VACUUM cannot run inside a transaction: vacuum_store ends the one
-- its driver opened, vacuums, and opens an empty one for the driver to commit.
COMMIT;

-- name: vacuum_incremental
-- params: none
-- returns: nothing
-- optional: yes
PRAGMA auto_vacuum = INCREMENTAL;

-- name: vacuum
-- params: none
-- returns: nothing
-- optional: yes
VACUUM;

-- name: begin_transaction
-- params: none
-- returns: nothing
-- optional: yes
BEGIN IMMEDIATE;

-- name: store_meta
-- params: none
-- returns: name, value
-- The store's own facts (revision 6): store_id once the store is encrypted.
SELECT name, value FROM safepoint_meta;

-- name: set_store_meta
-- params: name, value
-- returns: nothing
-- The first writer wins: two processes encrypting a store at once agree on its id.
INSERT INTO safepoint_meta (name, value) VALUES (:name, :value) ON CONFLICT (name) DO NOTHING;

-- name: data_keys
-- params: none
-- returns: key_id, kek_id, wrapped, created_at
SELECT key_id, kek_id, wrapped, created_at FROM safepoint_data_keys ORDER BY created_at, key_id;

-- name: insert_data_key
-- params: key_id, kek_id, wrapped, now
-- returns: nothing
INSERT INTO safepoint_data_keys (key_id, kek_id, wrapped, created_at)
VALUES (:key_id, :kek_id, :wrapped, :now);

-- name: rewrap_data_key
-- params: key_id, kek_id, wrapped
-- returns: nothing
-- A data key wrapped again under another keyring key: what rotating a
-- key-encryption key rewrites (one row per data key, never a checkpoint).
UPDATE safepoint_data_keys SET kek_id = :kek_id, wrapped = :wrapped WHERE key_id = :key_id;

-- name: runs_after
-- params: after_ref, limit
-- returns: run_ref, run_id
-- Every run, by row id, a page at a time: what encrypt and rekey walk.
SELECT id, run_id FROM safepoint_runs WHERE id > :after_ref ORDER BY id LIMIT :limit;

-- name: sealed_run
-- params: run_ref
-- returns: labels, counters, last_error, head_digest
-- The run row's content columns as stored (SQLite keeps no counters or head digest there).
SELECT labels, NULL, last_error, NULL FROM safepoint_runs WHERE id = :run_ref;

-- name: sealed_rows
-- params: run_ref
-- returns: step, header, digest, messages, chains
-- Every row of a run as stored, pruned carriers too, oldest first.
SELECT step, header, digest, messages, chains FROM safepoint_checkpoints
WHERE id BETWEEN :run_ref * 4294967296 AND :run_ref * 4294967296 + 4294967295
ORDER BY id;

-- name: reseal_row
-- params: run_ref, step, header, digest, messages, chains
-- returns: nothing
-- One row's content sealed again (under a new data key, or for the first time).
UPDATE safepoint_checkpoints
SET header = :header, digest = :digest, messages = :messages, chains = :chains
WHERE id = :run_ref * 4294967296 + :step;

-- name: reseal_run
-- params: run_ref, labels, counters, error, head_digest
-- returns: nothing
UPDATE safepoint_runs SET labels = :labels, last_error = :error WHERE id = :run_ref;

-- name: blobs_after
-- params: after_digest, limit
-- returns: digest, data
-- The database blob table, a page at a time, by digest.
SELECT digest, data FROM safepoint_blobs WHERE digest > :after_digest ORDER BY digest LIMIT :limit;

-- name: reseal_blob
-- params: digest, data
-- returns: nothing
UPDATE safepoint_blobs SET data = :data WHERE digest = :digest;

-- name: replace_store_meta
-- params: name, value
-- returns: nothing
-- A fact that changes (the encryption state: converting, then on).
INSERT INTO safepoint_meta (name, value) VALUES (:name, :value)
ON CONFLICT (name) DO UPDATE SET value = excluded.value;

-- name: secure_delete
-- params: none
-- returns: secure_delete
-- optional: yes
-- Deleted content overwritten with zeros from now on, on this connection
-- (safepoint encrypt, before its VACUUM: no plaintext left in free pages).
PRAGMA secure_delete = ON;

-- name: wal_truncate
-- params: none
-- returns: busy, log_frames, checkpointed
-- optional: yes
-- Outside a transaction: the WAL's frames copied into the file and the WAL
-- cut to nothing, so no page written before (plaintext) stays in it.
PRAGMA wal_checkpoint(TRUNCATE);

-- name: history_sealed
-- params: run_id
-- returns: step, schema_version, status, created_at, message_count, digest, header
-- history on an encrypted store (sealed_ops asks for it instead): each row's
-- header too, which gives back the plain digest its keyed one stands for.
SELECT c.step, c.schema_version, c.status, c.created_at, c.message_count, c.digest, c.header
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c
  ON c.id BETWEEN r.id * 4294967296 AND r.id * 4294967296 + 4294967295
WHERE r.run_id = :run_id AND c.pruned = 0
ORDER BY c.id;


-- name: sealed_run_read
-- params: run_ref
-- returns: labels, counters, last_error, head_digest
-- sealed_run for rekey --status: read only.
SELECT labels, NULL, last_error, NULL FROM safepoint_runs WHERE id = :run_ref;

-- The call journal (revision 8; store/ops/journal.py, docs/journal.md).

-- name: call_run
-- params: run_id
-- returns: run_ref, head_step, lease_owner, lease_epoch, lease_expires_at
-- The run a journal write belongs to: its head step (NULL before its first
-- checkpoint) and its lease, checked by the op as a save checks it. BEGIN
-- IMMEDIATE holds the write lock: no claim or hold moves the lease meanwhile.
SELECT r.id,
       (SELECT max(id) FROM safepoint_checkpoints
        WHERE id BETWEEN r.id * 4294967296 AND r.id * 4294967296 + 4294967295) - r.id * 4294967296,
       r.lease_owner, r.lease_epoch, r.lease_expires_at
FROM safepoint_runs AS r WHERE r.run_id = :run_id;

-- name: call_intent
-- params: run_ref, key, step, request, digest, writer, epoch, now
-- returns: written
-- Put if absent: an entry already under the key (an intent, or a result)
-- stays as it is, and no row comes back. digest is the empty result's: keyed
-- on an encrypted store, so encrypt_store tells an intent written before it.
INSERT INTO safepoint_calls (run_ref, key, step, state, request, digest, writer, epoch, created_at)
VALUES (:run_ref, :key, :step, 'intent', :request, :digest, :writer, :epoch, :now)
ON CONFLICT (run_ref, key) DO NOTHING
RETURNING 1;

-- name: call_done
-- params: run_ref, key, step, request, result, digest, blobs, writer, epoch, now
-- returns: step, writer, epoch, created_at, same_request
-- The first result wins: an intent of :step becomes done (the op passes the
-- step the result is sealed for: the checkpoint that covers the intent covers
-- its result), keeping its writer, epoch and request; an entry already done,
-- or an intent of another step (the op reads it and puts again at its step),
-- stays as it is, and no row comes back. What comes back is the entry as it
-- now stands, compared with :request as call_get compares it: the writer
-- need not read it back.
INSERT INTO safepoint_calls (
    run_ref, key, step, state, request, result, digest, blobs, writer, epoch, created_at, done_at
) VALUES (:run_ref, :key, :step, 'done', :request, :result, :digest, :blobs, :writer, :epoch, :now, :now)
ON CONFLICT (run_ref, key) DO UPDATE
SET state = 'done', result = excluded.result, digest = excluded.digest, blobs = excluded.blobs,
    done_at = excluded.done_at
WHERE safepoint_calls.state = 'intent' AND safepoint_calls.step = excluded.step
RETURNING step, writer, epoch, created_at,
          CASE WHEN :request IS NULL OR request IS NULL THEN NULL ELSE request = :request END;

-- name: call_get
-- params: run_id, key, request, now
-- returns: key, step, state, result, blobs, digest, writer, epoch, writer_live, same_request,
--          created_at, done_at
-- One entry, by its key: a primary-key lookup, whatever the run's length.
-- writer_live: the lease that wrote it is still the run's, unexpired.
-- same_request: the entry's request digest equals :request (NULL if either is).
SELECT c.key, c.step, c.state, c.result, c.blobs, c.digest, c.writer, c.epoch,
       coalesce(c.writer = r.lease_owner AND c.epoch = r.lease_epoch AND r.lease_expires_at > :now, 0),
       CASE WHEN :request IS NULL OR c.request IS NULL THEN NULL ELSE c.request = :request END,
       c.created_at, c.done_at
FROM safepoint_runs AS r
JOIN safepoint_calls AS c ON c.run_ref = r.id AND c.key = :key
WHERE r.run_id = :run_id;

-- name: calls_of_run
-- params: run_id, step
-- returns: key, step, state, result, blobs, digest, writer, epoch, created_at, done_at
-- A run's entries (of one step, or all with :step NULL), in the order they
-- were written: show, history, export and verify.
SELECT c.key, c.step, c.state, c.result, c.blobs, c.digest, c.writer, c.epoch, c.created_at, c.done_at
FROM safepoint_runs AS r
JOIN safepoint_calls AS c ON c.run_ref = r.id
WHERE r.run_id = :run_id AND (:step IS NULL OR c.step = :step)
ORDER BY c.step, c.created_at, c.key;

-- name: delete_calls
-- params: run_ref
-- returns: nothing
DELETE FROM safepoint_calls WHERE run_ref = :run_ref;

-- name: delete_calls_of_step
-- params: run_ref, step
-- returns: nothing
-- Retention: the entries a pruned checkpoint covered go with it.
DELETE FROM safepoint_calls WHERE run_ref = :run_ref AND step = :step;

-- name: sealed_calls
-- params: run_ref
-- returns: key, step, result, request, digest
-- A run's journal entries as stored, for encrypt and rekey (ops/resealing.py).
SELECT key, step, result, request, digest FROM safepoint_calls WHERE run_ref = :run_ref ORDER BY key;

-- name: reseal_call
-- params: run_ref, key, result, request, digest
-- returns: nothing
-- One entry sealed again (under a new data key, or for the first time: its digests keyed).
UPDATE safepoint_calls SET result = :result, request = :request, digest = :digest
WHERE run_ref = :run_ref AND key = :key;

-- The call journal as stored: verify, export and import (store/ops/journal_stored.py).

-- name: calls_stored
-- params: run_id
-- returns: key, step, state, request, result, blobs, digest, created_at, done_at
-- A run's entries as stored, oldest first: the result and its digest, which
-- verify checks (an encrypted store's entry that does not open for its place
-- comes back unopened, so verify names it and goes on: sealed_ops), and the
-- request digest, which export carries.
SELECT c.key, c.step, c.state, c.request, c.result, c.blobs, c.digest, c.created_at, c.done_at
FROM safepoint_runs AS r
JOIN safepoint_calls AS c ON c.run_ref = r.id
WHERE r.run_id = :run_id
ORDER BY c.step, c.created_at, c.key;

-- name: call_import
-- params: run_ref, key, step, state, request, result, digest, blobs, created_at, done_at
-- returns: written
-- An entry an import carries in, at the step and times it was given: put if
-- absent, as every journal write is (an entry already under the key stays).
INSERT INTO safepoint_calls (
    run_ref, key, step, state, request, result, digest, blobs, created_at, done_at
) VALUES (:run_ref, :key, :step, :state, :request, :result, :digest, :blobs, :created_at, :done_at)
ON CONFLICT (run_ref, key) DO NOTHING
RETURNING 1;

-- name: calls_covered
-- params: run_id
-- returns: step, calls
-- Each kept checkpoint of a run and how many journal entries it covers (NULL:
-- saved before the journal's revision): verify tells an entry missing, or
-- one added to a step after its checkpoint, and one past the run's next step.
SELECT c.step, c.calls
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c
  ON c.id BETWEEN r.id * 4294967296 AND r.id * 4294967296 + 4294967295
WHERE r.run_id = :run_id AND c.pruned = 0
ORDER BY c.id;

-- name: call_recount
-- params: run_ref, step
-- returns: nothing
-- An import writes entries of a step whose checkpoint it saved first (the
-- run's step 0 stands for the history up to the exported checkpoint): that
-- checkpoint then covers them, as if they had been recorded before it.
UPDATE safepoint_checkpoints
SET calls = (SELECT count(*) FROM safepoint_calls WHERE run_ref = :run_ref AND step = :step)
WHERE id = :run_ref * 4294967296 + :step AND pruned = 0;

-- Redaction (store/ops/redacting.py): a run's rows and journal as stored,
-- rewritten in place, and the audit record of each call.

-- name: redaction_rows
-- params: run_ref
-- returns: step, header, digest, messages, chains, first_seq, added, ranges, pruned, blobs
-- Every row of a run as stored, pruned carriers too, oldest first, with
-- what places its bodies in the run's message log.
SELECT step, header, digest, messages, chains, first_seq, added, ranges, pruned, blobs
FROM safepoint_checkpoints
WHERE id BETWEEN :run_ref * 4294967296 AND :run_ref * 4294967296 + 4294967295
ORDER BY id;

-- name: redact_row
-- params: run_ref, step, header, digest, messages, chains, blobs
-- returns: nothing
UPDATE safepoint_checkpoints
SET header = :header, digest = :digest, messages = :messages, chains = :chains, blobs = :blobs
WHERE id = :run_ref * 4294967296 + :step;

-- name: redaction_calls
-- params: run_ref
-- returns: key, step, result, blobs
SELECT key, step, result, blobs FROM safepoint_calls WHERE run_ref = :run_ref ORDER BY key;

-- name: redact_call
-- params: run_ref, key, result, digest, blobs
-- returns: nothing
UPDATE safepoint_calls SET result = :result, digest = :digest, blobs = :blobs
WHERE run_ref = :run_ref AND key = :key;

-- name: redaction_record
-- params: run_ref, redaction_id
-- returns: record
SELECT record FROM safepoint_redactions WHERE run_ref = :run_ref AND redaction_id = :redaction_id;

-- name: put_redaction_record
-- params: run_ref, redaction_id, head_step, now, record, mac
-- returns: nothing
INSERT INTO safepoint_redactions (run_ref, redaction_id, head_step, created_at, record, mac)
VALUES (:run_ref, :redaction_id, :head_step, :now, :record, :mac)
ON CONFLICT (run_ref, redaction_id) DO UPDATE
SET head_step = excluded.head_step, record = excluded.record, mac = excluded.mac;

-- name: key_redaction_record
-- params: run_ref, redaction_id, mac
-- returns: nothing
-- A record written on a plain store gets its check value keyed when the store is encrypted.
UPDATE safepoint_redactions SET mac = :mac WHERE run_ref = :run_ref AND redaction_id = :redaction_id;

-- name: redaction_records
-- params: run_id
-- returns: redaction_id, created_at, record, mac
-- A run's audit records, oldest first (safepoint show and verify).
SELECT d.redaction_id, d.created_at, d.record, d.mac
FROM safepoint_runs AS r
JOIN safepoint_redactions AS d ON d.run_ref = r.id
WHERE r.run_id = :run_id
ORDER BY d.created_at, d.redaction_id;

-- name: redacted_head
-- params: run_ref
-- returns: head_step
-- The latest head step a redaction rewrote: a writer whose view of that
-- step is not the stored one held it from before the redaction (Conflict).
SELECT max(head_step) FROM safepoint_redactions WHERE run_ref = :run_ref;

-- name: delete_redactions
-- params: run_ref
-- returns: nothing
DELETE FROM safepoint_redactions WHERE run_ref = :run_ref;

-- name: forks_all
-- params: run_id
-- returns: run_ref, run_id
-- Every run forked from a run (a redaction follows the copies a fork made).
SELECT id, run_id FROM safepoint_runs WHERE parent_run_id = :run_id ORDER BY id;

-- name: run_ref_of
-- params: run_id
-- returns: run_ref
-- A run's row id, read only (run_exists locks it on PostgreSQL).
SELECT id FROM safepoint_runs WHERE run_id = :run_id;

-- name: redaction_seen
-- params: redaction_id
-- returns: runs
-- How many runs a redaction call (by id) has audit records on: a rerun after
-- a kill that finds nothing left to rewrite still scrubs the file's pages.
SELECT count(*) FROM safepoint_redactions WHERE redaction_id = :redaction_id;

-- name: redaction_runs_of
-- params: run_refs
-- returns: run_ref, labels, counters, last_error, head_digest
-- sealed_run_read for a batch of runs (a JSON list of row ids): the scan's.
SELECT id, labels, NULL, last_error, NULL FROM safepoint_runs
WHERE id IN (SELECT value FROM json_each(:run_refs));

-- name: redaction_rows_of
-- params: run_refs
-- returns: run_ref, step, header, digest, messages, chains, first_seq, added, ranges, pruned, blobs
-- redaction_rows for a batch of runs, by each run's key range.
SELECT w.value, c.step, c.header, c.digest, c.messages, c.chains, c.first_seq, c.added, c.ranges,
       c.pruned, c.blobs
FROM json_each(:run_refs) AS w
JOIN safepoint_checkpoints AS c
  ON c.id BETWEEN w.value * 4294967296 AND w.value * 4294967296 + 4294967295
ORDER BY c.id;

-- name: redaction_calls_of
-- params: run_refs
-- returns: run_ref, key, step, result, blobs
SELECT run_ref, key, step, result, blobs FROM safepoint_calls
WHERE run_ref IN (SELECT value FROM json_each(:run_refs))
ORDER BY run_ref, key;

-- name: tenant_held
-- params: none
-- returns: runs, checkpoints, blobs, meta, data_keys, calls, redactions
-- What the tenant holds, per table (safepoint tenant erase; a SQLite file is one tenant's).
SELECT (SELECT count(*) FROM safepoint_runs), (SELECT count(*) FROM safepoint_checkpoints),
       (SELECT count(*) FROM safepoint_blobs), (SELECT count(*) FROM safepoint_meta),
       (SELECT count(*) FROM safepoint_data_keys), (SELECT count(*) FROM safepoint_calls),
       (SELECT count(*) FROM safepoint_redactions);

-- name: erase_data_keys
-- params: none
-- returns: key_id
-- The tenant's data keys deleted: the first step of an erase (crypto-erasure).
DELETE FROM safepoint_data_keys RETURNING key_id;

-- name: erase_blobs
-- params: limit
-- returns: digest
-- A page of the tenant's database blob rows deleted.
DELETE FROM safepoint_blobs
WHERE digest IN (SELECT digest FROM safepoint_blobs ORDER BY digest LIMIT :limit)
RETURNING digest;

-- name: erase_meta
-- params: none
-- returns: name
-- The tenant's meta rows deleted: the last step of an erase.
DELETE FROM safepoint_meta RETURNING name;
