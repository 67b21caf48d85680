-- 0015: the exact source bytes of ingested records, kept beside their
-- entries and erasable. Mirrors postgres/0015_source_records.sql; SQLite
-- has no roles, so the triggers are the only enforcement: a row of
-- source_records may be deleted only once a source_erasures row for the
-- same (session_id, position) exists, inserted first in the same
-- transaction (ledger.SourceEraser.EraseSource); source_erasures itself is
-- append-only. Times are Unix microseconds.
CREATE TABLE source_records (
    session_id    TEXT NOT NULL,
    position      INTEGER NOT NULL,
    source_sha256 BLOB NOT NULL CHECK (length(source_sha256) = 32),
    record        BLOB NOT NULL,
    recorded_at   INTEGER NOT NULL,
    PRIMARY KEY (session_id, position),
    FOREIGN KEY (session_id, position) REFERENCES entries (session_id, position)
);

CREATE TABLE source_erasures (
    session_id TEXT NOT NULL,
    position   INTEGER NOT NULL,
    erased_at  INTEGER NOT NULL,
    reason     TEXT NOT NULL CHECK (trim(reason) <> ''),
    erased_by  TEXT NOT NULL,
    PRIMARY KEY (session_id, position),
    FOREIGN KEY (session_id, position) REFERENCES entries (session_id, position)
);

CREATE TRIGGER source_erasures_no_update BEFORE UPDATE ON source_erasures
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on source_erasures refused: the table is append-only'); END;
CREATE TRIGGER source_erasures_no_delete BEFORE DELETE ON source_erasures
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on source_erasures refused: the table is append-only'); END;

CREATE TRIGGER source_records_no_update BEFORE UPDATE ON source_records
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on source_records refused: the table is append-only'); END;
CREATE TRIGGER source_records_erased_only BEFORE DELETE ON source_records
WHEN NOT EXISTS (SELECT 1 FROM source_erasures WHERE session_id = OLD.session_id AND position = OLD.position)
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on source_records refused: the table is append-only, and no erasure is recorded for the row'); END;
