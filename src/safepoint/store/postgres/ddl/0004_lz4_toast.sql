-- Revision 4: lz4 instead of pglz for the columns that hold large values.
--
-- A row over 2 KB is compressed by TOAST before it is stored, inside the
-- saving backend, with the column's compression method. pglz was most of
-- the server's CPU in a save that carries a large tool output, and it keeps
-- its result only when it saves 25 percent, so on typical tool output it
-- spent that CPU and stored the bytes uncompressed anyway; lz4 is several
-- times faster and keeps any saving. Only the method changes: no stored
-- value is rewritten (old values keep the method they were written with,
-- and both read back the same). lz4 exists only in servers built with it
-- (PostgreSQL 14+ --with-lz4, as the common packages are); elsewhere the
-- columns keep the server's default.

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
