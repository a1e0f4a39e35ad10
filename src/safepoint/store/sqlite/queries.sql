-- Named queries for the SQLite backend. Each block starts with "-- name: x".
-- Parameters are named (:param); the Python side never builds SQL text.
--
-- Writes run inside BEGIN IMMEDIATE, which takes SQLite's single write lock
-- up front: a read-then-write transaction can then never fail half way with
-- SQLITE_BUSY, and the "is this the next step?" check cannot race.

-- name: run_head
SELECT id, head_step, next_seq, head_digest FROM safepoint_runs WHERE run_id = :run_id;

-- name: insert_run
INSERT INTO safepoint_runs (
    run_id, status, head_step, schema_version, labels, counters,
    parent_run_id, parent_step, next_seq, head_digest, created_at, updated_at
) VALUES (
    :run_id, :status, :step, :schema_version, :labels, :counters,
    :parent_run_id, :parent_step, :next_seq, :digest, :now, :now
) RETURNING id;

-- name: advance_run
UPDATE safepoint_runs
SET status = :status, head_step = :step, schema_version = :schema_version,
    labels = :labels, counters = :counters, next_seq = :next_seq,
    head_digest = :digest, updated_at = :now
WHERE id = :run_ref AND head_step = :step - 1;

-- name: insert_message
INSERT INTO safepoint_messages (run_ref, seq, body) VALUES (:run_ref, :seq, :body);

-- name: insert_checkpoint
INSERT INTO safepoint_checkpoints (
    run_ref, step, schema_version, status, created_at, message_count, ranges, header, digest
) VALUES (
    :run_ref, :step, :schema_version, :status, :now, :message_count, :ranges, :header, :digest
);

-- name: checkpoint_latest
SELECT r.id, c.step, c.ranges, c.header, c.digest
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c ON c.run_ref = r.id AND c.step = r.head_step
WHERE r.run_id = :run_id;

-- name: checkpoint_at
SELECT r.id, c.step, c.ranges, c.header, c.digest
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c ON c.run_ref = r.id AND c.step = :step
WHERE r.run_id = :run_id;

-- name: view_messages
-- One query whatever the number of ranges: json_each walks the range list
-- and each range is an index range scan on (run_ref, seq).
SELECT m.body
FROM json_each(:ranges) AS r
JOIN safepoint_messages AS m
  ON m.run_ref = :run_ref
 AND m.seq >= r.value ->> 0
 AND m.seq < r.value ->> 1
ORDER BY r.key, m.seq;

-- name: history
SELECT c.step, c.schema_version, c.status, c.created_at, c.message_count, c.digest
FROM safepoint_runs AS r
JOIN safepoint_checkpoints AS c ON c.run_ref = r.id
WHERE r.run_id = :run_id
ORDER BY c.step;

-- name: run_exists
SELECT id FROM safepoint_runs WHERE run_id = :run_id;

-- name: run_info
SELECT id, run_id, status, head_step, schema_version, labels, counters,
       created_at, updated_at, parent_run_id, parent_step
FROM safepoint_runs WHERE run_id = :run_id;

-- name: list_runs
-- Newest first, paged by the run's row id (stable while runs are updated).
-- Filters are optional: a NULL parameter switches its filter off. Labels
-- match when every wanted key/value pair is among the run's labels.
SELECT id, run_id, status, head_step, schema_version, labels, counters,
       created_at, updated_at, parent_run_id, parent_step
FROM safepoint_runs
WHERE (:statuses IS NULL OR status IN (SELECT value FROM json_each(:statuses)))
  AND (:updated_since IS NULL OR updated_at >= :updated_since)
  AND (:before_id IS NULL OR id < :before_id)
  AND (:labels IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(:labels) AS want
        WHERE NOT EXISTS (
            SELECT 1 FROM json_each(safepoint_runs.labels) AS have
            WHERE have.key = want.key AND have.value = want.value)))
ORDER BY id DESC
LIMIT :limit;

-- name: copy_view_messages
-- Fork: the new run gets its own copy of the messages the source checkpoint
-- sees, renumbered 0..n-1, so the two runs never share log rows.
INSERT INTO safepoint_messages (run_ref, seq, body)
SELECT :new_ref, ROW_NUMBER() OVER (ORDER BY r.key, m.seq) - 1, m.body
FROM json_each(:ranges) AS r
JOIN safepoint_messages AS m
  ON m.run_ref = :run_ref
 AND m.seq >= r.value ->> 0
 AND m.seq < r.value ->> 1;

-- name: delete_messages
DELETE FROM safepoint_messages WHERE run_ref = :run_ref;

-- name: delete_checkpoints
DELETE FROM safepoint_checkpoints WHERE run_ref = :run_ref;

-- name: delete_run
DELETE FROM safepoint_runs WHERE id = :run_ref;
