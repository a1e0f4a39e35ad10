-- Revision 9: the call journal (see the SQLite revision 8 for what each
-- column holds). Entries go with their run (ON DELETE CASCADE is not used:
-- delete_run deletes them first, as it deletes checkpoints, in one order on
-- both dialects).
CREATE TABLE safepoint_calls (
    run_ref     bigint      NOT NULL REFERENCES safepoint_runs (id),
    key         text        NOT NULL,
    step        bigint      NOT NULL,
    state       text        NOT NULL CHECK (state IN ('intent', 'done')),
    request     bytea,
    result      bytea,
    digest      bytea,
    blobs       jsonb,
    writer      text,
    epoch       bigint,
    created_at  timestamptz NOT NULL,
    done_at     timestamptz,
    PRIMARY KEY (run_ref, key)
);

CREATE INDEX safepoint_calls_step ON safepoint_calls (run_ref, step);

-- Each checkpoint names the entries it covers (see the SQLite revision 8).
ALTER TABLE safepoint_checkpoints ADD COLUMN calls integer;
