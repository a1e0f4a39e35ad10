-- Revision 6: which rows carry each range of a checkpoint's messages (see
-- the SQLite revision of the same name): one [first_step, last_step] per
-- range, as text (only the library reads it back). NULL in older rows.

ALTER TABLE safepoint_checkpoints ADD COLUMN carriers text;
