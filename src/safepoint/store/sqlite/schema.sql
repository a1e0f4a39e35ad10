-- The whole current schema, for fresh databases. It must equal what the
-- numbered revisions in ddl/ produce; tests/test_ddl.py proves it.
--
-- Why the tables look the way they do: under synchronous=FULL a save's cost
-- is bounded by the pages its commit writes to the WAL. A save therefore
-- writes a single row (the checkpoint, with the messages it adds), appended
-- in a rowid table with no secondary index, and leaves the run row alone.

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
    lease_expires_at INTEGER,
    retention       TEXT,                      -- the run's own retention policy, JSON (revision 3)
    attempts        INTEGER NOT NULL DEFAULT 0, -- claims since the last success or requeue (revision 4)
    retry_at        INTEGER,                   -- not claimable before this, after a failed attempt
    last_error      TEXT,                      -- the last attempt's error: type and scrubbed message
    status_change   TEXT                       -- a status set without a checkpoint, JSON (revision 7)
);

-- runs(updated_since=...) filters on the head checkpoint's created_at and
-- may scan: it is a rare listing filter, and an index would cost every save.
CREATE INDEX safepoint_runs_status ON safepoint_runs (status, id);
CREATE INDEX safepoint_runs_queue ON safepoint_runs (queued_at, id) WHERE queued_at IS NOT NULL;

-- One row per (run, step), keyed id = run_ref * 2^32 + step: a run's
-- checkpoints are one contiguous key range, found without an index.
--
-- The message log lives in these rows too: each row carries the messages its
-- save added (seqs first_seq .. first_seq + added - 1, numbered per run), so a
-- save writes one row. Rows are never updated; a history rewrite adds new
-- messages under new seqs and a new range, so older checkpoints still see
-- exactly the messages they saw.
--
-- created_at is microseconds since the epoch, UTC. header is the canonical
-- JSON of everything but the messages (it carries the message count and the
-- digest chain); ranges says which spans of the run's message log the
-- checkpoint sees, as a JSON list of [start, end) seqs.
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
    first_seq       INTEGER NOT NULL,          -- seq of the first message this row adds
    added           INTEGER NOT NULL,          -- how many messages this row adds
    messages        BLOB,                      -- their bodies, newline-joined (NULL if none)
    blobs           TEXT,                      -- digests this row references, JSON (revision 3)
    pruned          INTEGER NOT NULL DEFAULT 0, -- dropped by retention, kept as a message carrier
    carriers        TEXT,                      -- per range, the steps of its rows, JSON (revision 5)
    chains          BLOB,                      -- the chain value after each added message (revision 5)
    CHECK (id = run_ref * 4294967296 + step)
);

-- The database blob store: content-addressed values written in the
-- checkpoint's own transaction (revision 3).
CREATE TABLE safepoint_blobs (
    digest          TEXT    PRIMARY KEY,
    size            INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    data            BLOB    NOT NULL
);

-- Encryption at rest (revision 6): the store's own facts (store_id) and its
-- data keys, each wrapped under a keyring key. Empty unless encrypted.
CREATE TABLE safepoint_meta (
    name            TEXT    PRIMARY KEY,
    value           TEXT    NOT NULL
);

CREATE TABLE safepoint_data_keys (
    key_id          TEXT    PRIMARY KEY,
    kek_id          TEXT    NOT NULL,          -- the keyring key it is wrapped under
    wrapped         BLOB    NOT NULL,          -- nonce, the key sealed under kek_id, tag
    created_at      INTEGER NOT NULL           -- microseconds since the epoch, UTC
);
