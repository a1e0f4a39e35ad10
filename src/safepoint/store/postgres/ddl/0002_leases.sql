-- Revision 2: a run queue and fenced leases, for workers that claim runs.
--
-- queued_at is set while a run waits for (or is being worked by) a worker;
-- a claim takes the oldest queued run whose lease is free or expired and
-- bumps lease_epoch, which every save made under the lease must still match.
-- The partial index holds queued runs only: it is all a claim reads, and it
-- stays as small as the queue. ADD COLUMN with a constant default rewrites
-- nothing (PostgreSQL 11+), so this revision is instant on a large table.

ALTER TABLE safepoint_runs ADD COLUMN queued_at timestamptz;
ALTER TABLE safepoint_runs ADD COLUMN lease_owner text;
ALTER TABLE safepoint_runs ADD COLUMN lease_epoch bigint NOT NULL DEFAULT 0;
ALTER TABLE safepoint_runs ADD COLUMN lease_expires_at timestamptz;

CREATE INDEX safepoint_runs_queue ON safepoint_runs (queued_at, id) WHERE queued_at IS NOT NULL;
