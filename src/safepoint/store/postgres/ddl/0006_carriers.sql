-- Revision 6: which rows carry each range of a checkpoint's messages, and
-- the digest chain value after each message a row carries (see the SQLite
-- revision of the same name): carriers as text (only the library reads it
-- back), chains as 32 bytes per message. NULL in older rows.

ALTER TABLE safepoint_checkpoints ADD COLUMN carriers text;
ALTER TABLE safepoint_checkpoints ADD COLUMN chains bytea;
