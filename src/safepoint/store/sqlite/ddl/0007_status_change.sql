-- Revision 7: the run row's status is covered (docs/operations.md, "Damaged data").
--
-- A save sets the run row's status to its checkpoint's, which the
-- checkpoint's digest covers; release, requeue and cancel may set it
-- without a checkpoint. status_change records such a change, as the JSON
-- {"by": operation, "status": the status it set, "epoch": the lease epoch
-- it was made under}, and the next save clears it: safepoint verify then
-- accepts a status that is the head checkpoint's, or the one a current
-- record names. ADD COLUMN without a default rewrites nothing.
ALTER TABLE safepoint_runs ADD COLUMN status_change TEXT;

-- Runs whose status a release already set apart from their head (a
-- quarantined run, before this revision) are recorded as they stand, so
-- that verify does not call them tampered after the upgrade.
UPDATE safepoint_runs
SET status_change = json_object('by', 'upgrade', 'status', status, 'epoch', lease_epoch)
WHERE status IS NOT (
    SELECT c.status FROM safepoint_checkpoints AS c WHERE c.id = (
        SELECT max(id) FROM safepoint_checkpoints
        WHERE id BETWEEN safepoint_runs.id * 4294967296 AND safepoint_runs.id * 4294967296 + 4294967295));
