-- Revision 7: encryption at rest (see the SQLite revision of the same name):
-- the store's own facts by name (store_id), and the data keys, each
-- wrapped under a key-encryption key of the keyring. Empty on a store that
-- is never encrypted. CREATE TABLE rewrites nothing.

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
