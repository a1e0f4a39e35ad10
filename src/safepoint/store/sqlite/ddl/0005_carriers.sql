-- Revision 5: which rows carry each range of a checkpoint's messages, and
-- the digest chain value after each message a row carries.
--
-- carriers is a JSON list, one [first_step, last_step] per entry of ranges:
-- the steps of the rows whose added messages that range covers. A load then
-- reads exactly those rows by primary key, one short range scan per range,
-- instead of testing every row of the run against every range (a run that
-- rewrites its last message every step has a range per rewrite, and its
-- load grew with its rows times its ranges). NULL in rows written before
-- this revision: their loads take the scan, once, and the next save writes
-- the carriers again.
--
-- chains holds, for each message the row adds, the digest chain value after
-- it (32 bytes each, in seq order): what a save that did not load the run
-- (a fresh checkpoint in a process that never saw the run) compares its
-- messages with, instead of reading and decoding every stored body. The
-- values derive from the stored bodies alone, so they reveal nothing the
-- bodies do not. NULL in older rows: such a save reads the bodies.
-- ADD COLUMN rewrites nothing.

ALTER TABLE safepoint_checkpoints ADD COLUMN carriers TEXT;
ALTER TABLE safepoint_checkpoints ADD COLUMN chains BLOB;
