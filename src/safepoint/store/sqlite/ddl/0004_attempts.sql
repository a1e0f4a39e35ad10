-- Revision 4: poison runs. A worker's claim counts an attempt; a run whose
-- attempts keep failing waits until retry_at between them (microseconds)
-- and is quarantined (status failed) after the worker's max_attempts, with
-- last_error: the exception type and its scrubbed, truncated message — the
-- handler's own words, never a stored value. ADD COLUMN rewrites nothing.

ALTER TABLE safepoint_runs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE safepoint_runs ADD COLUMN retry_at INTEGER;
ALTER TABLE safepoint_runs ADD COLUMN last_error TEXT;
