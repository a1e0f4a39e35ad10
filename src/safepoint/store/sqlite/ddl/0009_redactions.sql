-- Revision 9: the audit records of redactions (safepoint redact,
-- store/ops/redacting.py). One row per run per redaction call: what it
-- named (secret names, rules, PII kinds, how many literal values), how
-- many values it replaced by rule and by step, when, and the head step it
-- left. Never a value. mac is SHA-256 of run id and record, keyed under
-- the index key on an encrypted store: verify shows the record, and says
-- when it was edited.
CREATE TABLE safepoint_redactions (
    run_ref       INTEGER NOT NULL REFERENCES safepoint_runs (id),
    redaction_id  TEXT    NOT NULL,
    head_step     INTEGER,
    created_at    INTEGER NOT NULL,
    record        TEXT    NOT NULL,
    mac           BLOB    NOT NULL,
    PRIMARY KEY (run_ref, redaction_id)
) WITHOUT ROWID;
