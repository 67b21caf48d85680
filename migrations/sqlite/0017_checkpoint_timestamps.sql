-- 0017: RFC 3161 time-stamps of signed checkpoints (ledger/tsa).
--
-- One row per checkpoint size: the TimeStampResp DER a time-stamping
-- authority returned for the SHA-256 of the checkpoint's note text
-- (docs/merkle-log.md, "Trusted time"). stamped_at is Unix microseconds.
CREATE TABLE tlog_timestamps (
    size       INTEGER PRIMARY KEY REFERENCES tlog_checkpoints (size),
    response   BLOB NOT NULL CHECK (length(response) BETWEEN 1 AND 65536),
    stamped_at INTEGER NOT NULL
);

CREATE TRIGGER tlog_timestamps_no_update BEFORE UPDATE ON tlog_timestamps
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on tlog_timestamps refused: the table is append-only'); END;
CREATE TRIGGER tlog_timestamps_no_delete BEFORE DELETE ON tlog_timestamps
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on tlog_timestamps refused: the table is append-only'); END;
