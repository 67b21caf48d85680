-- 0017: RFC 3161 time-stamps of signed checkpoints (ledger/tsa). Run as
-- the owner role.
--
-- One row per checkpoint size: the TimeStampResp DER a time-stamping
-- authority returned for the SHA-256 of the checkpoint's note text
-- (docs/merkle-log.md, "Trusted time"). Evidence: written once, never
-- changed; a checkpoint the authority could not stamp yet simply has no
-- row until it can.
CREATE TABLE tlog_timestamps (
    size       bigint PRIMARY KEY REFERENCES tlog_checkpoints (size),
    response   bytea NOT NULL CHECK (length(response) BETWEEN 1 AND 65536),
    stamped_at timestamptz NOT NULL
);

CREATE TRIGGER tlog_timestamps_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tlog_timestamps
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();

REVOKE ALL ON tlog_timestamps FROM PUBLIC;
GRANT SELECT, INSERT ON tlog_timestamps TO acsledger_writer;
