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
-- anyone's. The statement itself is the schema's function
-- safepoint_save_next (DDL revision 12, ddl/0012_tenants.sql): the
-- call is all that travels, with binary parameters. Its first argument is the
-- store's tenant, written into the SQL when the driver opens (qualified_sql):
-- the function sets it for the transaction before it reads a row. Its UPDATE locks the run
-- row as run_head's FOR UPDATE does; under READ COMMITTED a writer that
-- waited for it re-checks these conditions on the row as committed. No row
-- back: nothing was written (the save then goes the general way, which says
-- why).
SELECT * FROM {schema}.safepoint_save_next(
    {tenant}, %(run_id)s, %(step)s, %(digest)s, %(status)s, %(schema_version)s, %(labels)s, %(counters)s,
    %(next_seq)s, %(now)s, %(head_digest)s, %(first_seq)s, %(lease_owner)s, %(lease_epoch)s,
    %(message_count)s, %(ranges)s, %(header)s, %(added)s, %(messages)s, %(blobs)s, %(carriers)s,
    %(chains)s);
