-- Revision 11: the audit records of redactions (see the SQLite revision 9
-- for what each column holds).
CREATE TABLE safepoint_redactions (
    run_ref       bigint      NOT NULL REFERENCES safepoint_runs (id),
    redaction_id  text        NOT NULL,
    head_step     bigint,
    created_at    timestamptz NOT NULL,
    record        text        NOT NULL,
    mac           bytea       NOT NULL,
    PRIMARY KEY (run_ref, redaction_id)
);
