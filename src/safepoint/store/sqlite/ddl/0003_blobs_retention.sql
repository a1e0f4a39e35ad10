-- Revision 3: large values by reference, and retention.
--
-- blobs: the digests this row references — in its header, and in the
-- messages it carries — as a JSON list (NULL when none). Garbage collection
-- keeps every blob some remaining row names.
-- pruned: 1 once retention dropped the checkpoint but kept the row because a
-- retained checkpoint still sees messages it carries; its header is emptied
-- and load/history skip it.
-- retention: a run's own policy (JSON), overriding the store's.
-- safepoint_blobs: the database blob store (blobs written in the
-- checkpoint's own transaction); zstd-framed like the other blob stores.

ALTER TABLE safepoint_checkpoints ADD COLUMN blobs TEXT;
ALTER TABLE safepoint_checkpoints ADD COLUMN pruned INTEGER NOT NULL DEFAULT 0;
ALTER TABLE safepoint_runs ADD COLUMN retention TEXT;

CREATE TABLE safepoint_blobs (
    digest          TEXT    PRIMARY KEY,
    size            INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    data            BLOB    NOT NULL
);
