-- The whole current schema, for fresh databases. It must equal what the
-- numbered revisions in ddl/ produce; tests/test_ddl.py proves it.

-- Runs get an integer surrogate key (id) so the two large tables repeat a
-- small integer per row instead of the run_id string.

CREATE TABLE safepoint_runs (
    id              INTEGER PRIMARY KEY,
    run_id          TEXT    NOT NULL UNIQUE,
    status          TEXT    NOT NULL,
    head_step       INTEGER NOT NULL,
    schema_version  INTEGER NOT NULL,
    labels          TEXT    NOT NULL,          -- JSON object of str -> str
    counters        TEXT    NOT NULL,          -- JSON object, the head's counters
    parent_run_id   TEXT,
    parent_step     INTEGER,
    next_seq        INTEGER NOT NULL,          -- next free seq in this run's message log
    head_digest     BLOB    NOT NULL,          -- digest of the head checkpoint
    created_at      INTEGER NOT NULL,          -- microseconds since the epoch, UTC
    updated_at      INTEGER NOT NULL
);

CREATE INDEX safepoint_runs_status ON safepoint_runs (status, id);
CREATE INDEX safepoint_runs_updated ON safepoint_runs (updated_at);

-- One row per (run, step). header is the canonical JSON of everything but the
-- messages (it carries the message count and digest chain); ranges says which
-- spans of the message log the checkpoint sees, as a JSON list of [start, end).
CREATE TABLE safepoint_checkpoints (
    run_ref         INTEGER NOT NULL REFERENCES safepoint_runs (id),
    step            INTEGER NOT NULL,
    schema_version  INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    message_count   INTEGER NOT NULL,
    ranges          TEXT    NOT NULL,
    header          BLOB    NOT NULL,
    digest          BLOB    NOT NULL,          -- sha256 of header
    PRIMARY KEY (run_ref, step)
);

-- Messages are written once and never updated; a history rewrite appends new
-- rows and starts a new range, so older checkpoints still see their rows.
CREATE TABLE safepoint_messages (
    run_ref         INTEGER NOT NULL REFERENCES safepoint_runs (id),
    seq             INTEGER NOT NULL,
    body            BLOB    NOT NULL,          -- canonical JSON of one message
    PRIMARY KEY (run_ref, seq)
);
