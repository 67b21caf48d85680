-- 0007: records ingested from other systems. Mirrors
-- postgres/0007_ingest.sql; flags are a separate table (SQLite has no
-- arrays). Times are Unix microseconds.
CREATE TABLE ingest_records (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    source      TEXT NOT NULL,
    natural_key TEXT NOT NULL,
    replay_key  TEXT,
    digest      BLOB NOT NULL CHECK (length(digest) = 32),
    session_id  TEXT NOT NULL,
    position    INTEGER NOT NULL,
    entry_hash  BLOB NOT NULL CHECK (length(entry_hash) = 32),
    file        TEXT NOT NULL,
    record      INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL,
    UNIQUE (source, natural_key),
    FOREIGN KEY (session_id, position) REFERENCES entries (session_id, position)
);
CREATE UNIQUE INDEX ingest_records_replay ON ingest_records (source, replay_key) WHERE replay_key IS NOT NULL;

CREATE TABLE ingest_flags (
    record_seq INTEGER NOT NULL REFERENCES ingest_records (seq),
    flag       TEXT NOT NULL,
    PRIMARY KEY (flag, record_seq)
);

CREATE TABLE ingest_quarantine (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    source         TEXT NOT NULL,
    natural_key    TEXT NOT NULL,
    file           TEXT NOT NULL,
    record         INTEGER NOT NULL,
    reason         TEXT NOT NULL,
    detail         TEXT NOT NULL,
    raw            BLOB NOT NULL,
    raw_sha256     BLOB NOT NULL CHECK (length(raw_sha256) = 32),
    quarantined_at INTEGER NOT NULL,
    UNIQUE (source, file, record, raw_sha256)
);

CREATE TRIGGER ingest_records_no_update BEFORE UPDATE ON ingest_records
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on ingest_records refused: the table is append-only'); END;
CREATE TRIGGER ingest_records_no_delete BEFORE DELETE ON ingest_records
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on ingest_records refused: the table is append-only'); END;
CREATE TRIGGER ingest_flags_no_update BEFORE UPDATE ON ingest_flags
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on ingest_flags refused: the table is append-only'); END;
CREATE TRIGGER ingest_flags_no_delete BEFORE DELETE ON ingest_flags
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on ingest_flags refused: the table is append-only'); END;
CREATE TRIGGER ingest_quarantine_no_update BEFORE UPDATE ON ingest_quarantine
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on ingest_quarantine refused: the table is append-only'); END;
CREATE TRIGGER ingest_quarantine_no_delete BEFORE DELETE ON ingest_quarantine
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on ingest_quarantine refused: the table is append-only'); END;
