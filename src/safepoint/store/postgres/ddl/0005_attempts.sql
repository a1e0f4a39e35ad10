-- Revision 5: poison runs (see the SQLite revision 4 for what each column
-- means). ADD COLUMN with a constant default rewrites nothing.

ALTER TABLE safepoint_runs ADD COLUMN attempts integer NOT NULL DEFAULT 0;
ALTER TABLE safepoint_runs ADD COLUMN retry_at timestamptz;
ALTER TABLE safepoint_runs ADD COLUMN last_error text;
