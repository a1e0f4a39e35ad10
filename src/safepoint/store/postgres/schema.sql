-- The whole current schema, for a fresh database schema. It must equal what
-- the numbered revisions in ddl/ produce; tests/test_postgres.py proves it.
--
-- Every name is unqualified: the tables go to the schema chosen with
-- open_store(url, schema=...), which setup puts on search_path first.
--
-- Timestamps are timestamptz, not the integer microseconds the Python side
-- uses, so that an operator can write WHERE updated_at > now() - interval
-- '1 hour' and read times in psql. The queries convert exactly both ways:
-- 'epoch' + n * interval '1 microsecond' (n < 2^53, exact in float8) and
-- extract(epoch ...) * 1000000, which is numeric, hence exact, on PostgreSQL 14+.

CREATE TABLE safepoint_runs (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id          text        NOT NULL UNIQUE,
    status          text        NOT NULL,
    head_step       bigint      NOT NULL,
    head_digest     bytea       NOT NULL,           -- digest of the head checkpoint
    schema_version  integer     NOT NULL,
    labels          jsonb       NOT NULL,           -- object of str -> str
    counters        jsonb       NOT NULL,           -- the head checkpoint's counters
    parent_run_id   text,
    parent_step     bigint,
    next_seq        bigint      NOT NULL,           -- the next free seq of this run's message log
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    queued_at       timestamptz,                    -- set while queued for workers (revision 2)
    lease_owner     text,
    lease_epoch     bigint      NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    retention       jsonb,                          -- the run's own retention policy (revision 3)
    attempts        integer     NOT NULL DEFAULT 0, -- claims since success or requeue (revision 5)
    retry_at        timestamptz,                    -- not claimable before, after a failed attempt
    last_error      text,                           -- the last attempt's error, scrubbed
    status_change   text                            -- a status set without a checkpoint (revision 8)
);

-- What runs(...) filters on: status (paged by id), last update, labels @> {...}.
-- The updated_at index costs every save a non-HOT update (the indexed column
-- changes each time); listing runs "updated in the last hour" is what an
-- operator does most, so it is worth it here (SQLite, with its one writer,
-- makes the opposite choice).
CREATE INDEX safepoint_runs_status ON safepoint_runs (status, id);
CREATE INDEX safepoint_runs_updated ON safepoint_runs (updated_at);
CREATE INDEX safepoint_runs_labels ON safepoint_runs USING gin (labels jsonb_path_ops);
-- What a claim reads: queued runs only, oldest first.
CREATE INDEX safepoint_runs_queue ON safepoint_runs (queued_at, id) WHERE queued_at IS NOT NULL;

-- One row per (run, step). header is the canonical JSON of everything but
-- the messages (it carries the message count and digest chain) and digest is
-- sha256(header); both are bytea so that stored bytes are exactly what was
-- hashed. ranges says which [start, end) seqs of the run's message log the
-- checkpoint sees. status and created_at are columns for operators' queries.
--
-- The message log lives in these rows: each carries the messages its save
-- added (seqs first_seq .. first_seq + added - 1, numbered per run from the
-- run row's next_seq, which the locked run row makes race-free). Rows are
-- written once and never updated; bodies are bytea, so any text (NUL
-- included) round-trips exactly. One row per save, whatever it adds.
CREATE TABLE safepoint_checkpoints (
    run_ref         bigint      NOT NULL REFERENCES safepoint_runs (id),
    step            bigint      NOT NULL CHECK (step >= 0),
    schema_version  integer     NOT NULL,
    status          text        NOT NULL,
    created_at      timestamptz NOT NULL,
    message_count   bigint      NOT NULL,
    ranges          jsonb       NOT NULL,
    header          bytea       NOT NULL,
    digest          bytea       NOT NULL,
    first_seq       bigint      NOT NULL,           -- seq of the first message this row adds
    added           integer     NOT NULL,           -- how many messages this row adds
    messages        bytea,                          -- their bodies, newline-joined (NULL if none)
    blobs           jsonb,                          -- digests this row references (revision 3)
    pruned          boolean     NOT NULL DEFAULT false, -- dropped by retention, kept as a carrier
    carriers        text,                           -- per range, the steps of its rows (revision 6)
    chains          bytea,                          -- the chain value after each added message (revision 6)
    PRIMARY KEY (run_ref, step)
);

-- The database blob store: content-addressed values written in the
-- checkpoint's own transaction (revision 3).
CREATE TABLE safepoint_blobs (
    digest          text        PRIMARY KEY,
    size            bigint      NOT NULL,
    created_at      timestamptz NOT NULL,
    data            bytea       NOT NULL
);

-- Encryption at rest (revision 7): the store's own facts (store_id) and its
-- data keys, each wrapped under a keyring key. Empty unless encrypted.
CREATE TABLE safepoint_meta (
    name            text        PRIMARY KEY,
    value           text        NOT NULL
);

CREATE TABLE safepoint_data_keys (
    key_id          text        PRIMARY KEY,
    kek_id          text        NOT NULL,
    wrapped         bytea       NOT NULL,
    created_at      timestamptz NOT NULL
);

-- lz4 TOAST compression for the large columns where the server has it
-- (revision 4, which says why).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_settings
               WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE safepoint_checkpoints
            ALTER COLUMN header SET COMPRESSION lz4,
            ALTER COLUMN messages SET COMPRESSION lz4;
        ALTER TABLE safepoint_blobs ALTER COLUMN data SET COMPRESSION lz4;
    END IF;
END
$$;
