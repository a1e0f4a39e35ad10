-- Revision 8: the run row's status is covered (see the SQLite revision 7,
-- for what status_change records). ADD COLUMN without a default rewrites
-- nothing; runs whose status already differs from their head's are
-- recorded as they stand.
ALTER TABLE safepoint_runs ADD COLUMN status_change text;

UPDATE safepoint_runs AS r
SET status_change = json_build_object('by', 'upgrade', 'status', r.status, 'epoch', r.lease_epoch)::text
WHERE r.status IS DISTINCT FROM (
    SELECT c.status FROM safepoint_checkpoints AS c WHERE c.run_ref = r.id AND c.step = r.head_step);
