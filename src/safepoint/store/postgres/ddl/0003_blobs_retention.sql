-- Revision 3: large values by reference, and retention (see the SQLite
-- revision of the same number for what each column means). ADD COLUMN with a
-- constant default rewrites nothing, so this is instant on a large table.

ALTER TABLE safepoint_checkpoints ADD COLUMN blobs jsonb;
ALTER TABLE safepoint_checkpoints ADD COLUMN pruned boolean NOT NULL DEFAULT false;
ALTER TABLE safepoint_runs ADD COLUMN retention jsonb;

CREATE TABLE safepoint_blobs (
    digest          text        PRIMARY KEY,
    size            bigint      NOT NULL,
    created_at      timestamptz NOT NULL,
    data            bytea       NOT NULL
);
