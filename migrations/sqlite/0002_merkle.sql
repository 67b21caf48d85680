-- 0002: the Merkle log (ledger/tlog). Mirrors postgres/0002_merkle.sql;
-- SQLite has no roles, so the triggers are the only enforcement.

CREATE TABLE tlog_pending (
    entry_id INTEGER PRIMARY KEY REFERENCES entries (id)
);

CREATE TRIGGER entries_tlog_enqueue AFTER INSERT ON entries
BEGIN INSERT INTO tlog_pending (entry_id) VALUES (NEW.id); END;

INSERT INTO tlog_pending (entry_id) SELECT id FROM entries;

-- entry_id has no foreign key, as in Postgres: the integrator deletes each
-- leaf's entry from tlog_pending in the same transaction and refuses the
-- batch unless every one was queued.
CREATE TABLE tlog_leaves (
    idx        INTEGER PRIMARY KEY CHECK (idx >= 0),
    entry_id   INTEGER NOT NULL UNIQUE,
    entry_hash BLOB NOT NULL CHECK (length(entry_hash) = 32),
    data       BLOB NOT NULL CHECK (length(data) <= 65535)
);
CREATE INDEX tlog_leaves_entry_hash ON tlog_leaves (entry_hash);

CREATE TABLE tlog_tiles (
    level INTEGER NOT NULL CHECK (level BETWEEN 0 AND 7),
    idx   INTEGER NOT NULL CHECK (idx >= 0),
    data  BLOB NOT NULL CHECK (length(data) = 8192),
    root  BLOB NOT NULL CHECK (length(root) = 32),
    PRIMARY KEY (level, idx)
) WITHOUT ROWID;

CREATE TABLE tlog_checkpoints (
    size       INTEGER PRIMARY KEY CHECK (size > 0),
    note       BLOB NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE tlog_head (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    size      INTEGER NOT NULL REFERENCES tlog_checkpoints (size),
    note      BLOB NOT NULL
);

CREATE TABLE tlog_cosignatures (
    size       INTEGER NOT NULL REFERENCES tlog_checkpoints (size),
    line       BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (size, line)
);

CREATE TRIGGER tlog_leaves_no_update BEFORE UPDATE ON tlog_leaves
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on tlog_leaves refused: the table is append-only'); END;
CREATE TRIGGER tlog_leaves_no_delete BEFORE DELETE ON tlog_leaves
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on tlog_leaves refused: the table is append-only'); END;
CREATE TRIGGER tlog_tiles_no_update BEFORE UPDATE ON tlog_tiles
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on tlog_tiles refused: the table is append-only'); END;
CREATE TRIGGER tlog_tiles_no_delete BEFORE DELETE ON tlog_tiles
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on tlog_tiles refused: the table is append-only'); END;
CREATE TRIGGER tlog_checkpoints_no_update BEFORE UPDATE ON tlog_checkpoints
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on tlog_checkpoints refused: the table is append-only'); END;
CREATE TRIGGER tlog_checkpoints_no_delete BEFORE DELETE ON tlog_checkpoints
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on tlog_checkpoints refused: the table is append-only'); END;
CREATE TRIGGER tlog_cosignatures_no_update BEFORE UPDATE ON tlog_cosignatures
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on tlog_cosignatures refused: the table is append-only'); END;
CREATE TRIGGER tlog_cosignatures_no_delete BEFORE DELETE ON tlog_cosignatures
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on tlog_cosignatures refused: the table is append-only'); END;
CREATE TRIGGER tlog_head_no_delete BEFORE DELETE ON tlog_head
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on tlog_head refused: the table is append-only'); END;
CREATE TRIGGER tlog_head_forward BEFORE UPDATE ON tlog_head
WHEN NEW.size <= OLD.size
BEGIN SELECT RAISE(ABORT, 'acsledger: the latest checkpoint may only move forward'); END;
