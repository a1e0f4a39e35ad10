-- Revision 6: encryption at rest (docs/encryption.md).
--
-- safepoint_meta holds the store's own facts by name; the first is
-- store_id, a random id written when the store is first opened with a
-- keyring. Every sealed value names it in its associated data, so a value
-- copied into another store does not open.
--
-- safepoint_data_keys holds the data keys (DEKs), each wrapped (sealed)
-- under a key-encryption key of the keyring, named by kek_id: rotating a
-- key-encryption key rewraps these rows, never the checkpoints. A sealed
-- value carries the id of its data key. Both tables stay empty on a store
-- that is never encrypted. CREATE TABLE rewrites nothing.

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
