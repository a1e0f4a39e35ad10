-- Revision 8: the call journal (docs/journal.md).
--
-- One row per recorded call of a run, under the key its caller derives
-- (its place in the run: step and order, a tool call's id …). An entry is
-- written as an 'intent' before a call with an effect, and 'done' with its
-- result after; the first result stored wins (put if absent). request is a
-- digest of what was asked (keyed on an encrypted store), never the request;
-- result is the stored form of what came back (scrubbed, blobs out, sealed
-- on an encrypted store); digest is sha256 of key and result, for verify;
-- writer and epoch name the lease the intent was written under. step is the
-- step whose checkpoint covers the entry: retention deletes the entry with
-- that checkpoint, and deleting the run deletes its entries.
-- WITHOUT ROWID: a run's entries are one key range, as its checkpoints are.
CREATE TABLE safepoint_calls (
    run_ref     INTEGER NOT NULL REFERENCES safepoint_runs (id),
    key         TEXT    NOT NULL,
    step        INTEGER NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN ('intent', 'done')),
    request     BLOB,
    result      BLOB,
    digest      BLOB,
    blobs       TEXT,
    writer      TEXT,
    epoch       INTEGER,
    created_at  INTEGER NOT NULL,
    done_at     INTEGER,
    PRIMARY KEY (run_ref, key)
) WITHOUT ROWID;

CREATE INDEX safepoint_calls_step ON safepoint_calls (run_ref, step);

-- Each checkpoint names the entries it covers: how many the step had when
-- it was saved (NULL for rows saved before this revision). Entries of a
-- step are never added once its checkpoint is saved (new ones belong to the
-- next step), and a result keeps its intent's step, so verify can tell an
-- entry missing. ADD COLUMN without a default rewrites nothing.
ALTER TABLE safepoint_checkpoints ADD COLUMN calls INTEGER;
