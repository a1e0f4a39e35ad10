-- The whole current schema, for fresh databases. It must equal what the
-- numbered revisions in ddl/ produce; tests/test_ddl.py proves it.
--
-- Why the keys look the way they do: under synchronous=FULL a save's cost is
-- bounded by the pages its commit writes to the WAL. Rows appended at the
-- right edge of a rowid table cost one leaf page (SQLite's quick balance);
-- a separate index, or a WITHOUT ROWID table, costs one or more extra pages
-- per commit. So both large tables are rowid tables keyed for append, with
-- no secondary index.

-- A run's head is its checkpoint with the highest key (see below), not a
-- column here: a save then leaves this row alone unless the run's status or
-- labels change, which saves a page per commit. Listing joins the head.
CREATE TABLE safepoint_runs (
    id              INTEGER PRIMARY KEY,
    run_id          TEXT    NOT NULL UNIQUE,
    status          TEXT    NOT NULL,          -- the head's status (or set by release)
    labels          TEXT    NOT NULL,          -- JSON object of str -> str, the head's
    parent_run_id   TEXT,
    parent_step     INTEGER,
    created_at      INTEGER NOT NULL,
    queued_at       INTEGER,                   -- set while queued for workers (revision 2)
    lease_owner     TEXT,
    lease_epoch     INTEGER NOT NULL DEFAULT 0,
    lease_expires_at INTEGER
);

-- runs(updated_since=...) filters on the head checkpoint's created_at and
-- may scan: it is a rare listing filter, and an index would cost every save.
CREATE INDEX safepoint_runs_status ON safepoint_runs (status, id);
CREATE INDEX safepoint_runs_queue ON safepoint_runs (queued_at, id) WHERE queued_at IS NOT NULL;

-- One row per (run, step), keyed id = run_ref * 2^32 + step: a run's
-- checkpoints are one contiguous key range, found without an index.
-- created_at is microseconds since the epoch, UTC. header is the canonical JSON of everything but the messages (it carries
-- the message count and digest chain); ranges says which spans of the message
-- log the checkpoint sees, as a JSON list of [start, end) seqs.
CREATE TABLE safepoint_checkpoints (
    id              INTEGER PRIMARY KEY,
    run_ref         INTEGER NOT NULL REFERENCES safepoint_runs (id),
    step            INTEGER NOT NULL CHECK (step >= 0 AND step < 4294967296),
    schema_version  INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    message_count   INTEGER NOT NULL,
    ranges          TEXT    NOT NULL,
    header          BLOB    NOT NULL,
    digest          BLOB    NOT NULL,          -- sha256 of header
    CHECK (id = run_ref * 4294967296 + step)
);

-- The message log of every run, in one sequence (seq is the rowid, so new
-- messages append at the right edge). Rows are written once and never
-- updated; a history rewrite appends new rows and starts a new range, so
-- older checkpoints still see theirs. run_ref lets a load check that a range
-- really points into its own run.
CREATE TABLE safepoint_messages (
    seq             INTEGER PRIMARY KEY,
    run_ref         INTEGER NOT NULL REFERENCES safepoint_runs (id),
    body            BLOB    NOT NULL           -- canonical JSON of one message
);
