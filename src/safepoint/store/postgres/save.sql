-- The PostgreSQL-only statement of ops.save: a save of the next step of a run
-- in one statement, for a writer that already knows the run's head (an
-- optional query: SQLite's driver answers unsupported; see ops.save).
-- Same parameter conventions as queries.sql (named, integers cast to bigint,
-- no percent sign in comments).

-- name: save_next
-- params: run_id, step, digest, status, schema_version, labels, counters, next_seq, now,
--         head_digest, first_seq, lease_owner, lease_epoch, message_count, ranges, header,
--         added, messages, blobs, carriers, chains
-- returns: run_ref
-- ends: transaction
-- optional: yes
-- The run row moves to the new head and the checkpoint row is inserted, only
-- if the head is still the one the writer saved or loaded (step, digest, next
-- free seq) and the lease check ops.save makes holds: the writer's lease
-- (owner and epoch) when it saves under one, otherwise no live lease of
-- anyone's. The UPDATE locks the run row as run_head's FOR UPDATE does;
-- under READ COMMITTED a writer that waited for it re-checks these
-- conditions on the row as committed. No row back: nothing was written (the
-- save then goes the general way, which says why).
WITH head AS (
    UPDATE {schema}.safepoint_runs
    SET head_step = %(step)s::bigint, head_digest = %(digest)s, status = %(status)s, status_change = NULL,
        schema_version = %(schema_version)s::integer,
        labels = %(labels)s::jsonb, counters = %(counters)s::jsonb, next_seq = %(next_seq)s::bigint,
        updated_at = 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond'
    WHERE run_id = %(run_id)s
      AND head_step = %(step)s::bigint - 1
      AND head_digest = %(head_digest)s
      AND next_seq = %(first_seq)s::bigint
      AND CASE WHEN %(lease_owner)s::text IS NULL
               THEN lease_owner IS NULL OR lease_expires_at IS NULL
                    OR lease_expires_at <= 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond'
               ELSE lease_owner = %(lease_owner)s::text AND lease_epoch = %(lease_epoch)s::bigint
          END
    RETURNING id)
INSERT INTO {schema}.safepoint_checkpoints (
    run_ref, step, schema_version, status, created_at, message_count, ranges, header, digest,
    first_seq, added, messages, blobs, carriers, chains, calls
)
SELECT head.id, %(step)s::bigint, %(schema_version)s::integer, %(status)s,
       'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond',
       %(message_count)s::bigint, %(ranges)s::jsonb, %(header)s, %(digest)s,
       %(first_seq)s::bigint, %(added)s::integer, %(messages)s, %(blobs)s::jsonb, %(carriers)s,
       %(chains)s,
       (SELECT count(*) FROM {schema}.safepoint_calls AS e
        WHERE e.run_ref = head.id AND e.step = %(step)s::bigint)  -- the entries it covers
FROM head
RETURNING run_ref;
