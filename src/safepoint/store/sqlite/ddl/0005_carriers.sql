-- Revision 5: which rows carry each range of a checkpoint's messages.
--
-- carriers is a JSON list, one [first_step, last_step] per entry of ranges:
-- the steps of the rows whose added messages that range covers. A load then
-- reads exactly those rows by primary key, one short range scan per range,
-- instead of testing every row of the run against every range (a run that
-- rewrites its last message every step has a range per rewrite, and its
-- load grew with its rows times its ranges). NULL in rows written before
-- this revision: their loads take the scan, once, and the next save writes
-- the carriers again. ADD COLUMN rewrites nothing.

ALTER TABLE safepoint_checkpoints ADD COLUMN carriers TEXT;
