-- 0001: sessions, chain heads and entries, with append-only enforcement.
-- Mirrors postgres/0001_ledger.sql; SQLite has no roles, so the triggers
-- are the only enforcement. Times are Unix microseconds.

CREATE TABLE sessions (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL UNIQUE,
    agent_id   TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX sessions_agent_seq ON sessions (agent_id, seq);

CREATE TABLE heads (
    session_id TEXT PRIMARY KEY REFERENCES sessions (session_id),
    length     INTEGER NOT NULL CHECK (length > 0),
    head       BLOB NOT NULL CHECK (length(head) = 32),
    updated_at INTEGER NOT NULL
);

-- id is monotonically increasing (AUTOINCREMENT never reuses a value).
CREATE TABLE entries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id      TEXT NOT NULL REFERENCES sessions (session_id),
    position        INTEGER NOT NULL CHECK (position >= 0),
    entry_hash      BLOB NOT NULL CHECK (length(entry_hash) = 32),
    previous_hash   BLOB CHECK (length(previous_hash) = 32),
    entry_id        TEXT NOT NULL,
    step_id         TEXT NOT NULL,
    step_type       TEXT NOT NULL,
    entry_timestamp TEXT NOT NULL,
    recorded_at     INTEGER NOT NULL,
    content         BLOB NOT NULL,
    CHECK ((position = 0) = (previous_hash IS NULL)),
    UNIQUE (session_id, position),
    UNIQUE (session_id, step_id)
);
CREATE INDEX entries_step_type ON entries (step_type, session_id);

CREATE TABLE responses (
    session_id  TEXT NOT NULL,
    position    INTEGER NOT NULL,
    response    BLOB NOT NULL,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, position),
    FOREIGN KEY (session_id, position) REFERENCES entries (session_id, position)
);

CREATE TABLE requests (
    session_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    nonce      TEXT NOT NULL,
    seen_at    INTEGER NOT NULL,
    PRIMARY KEY (session_id, request_id)
);
CREATE UNIQUE INDEX requests_nonce ON requests (session_id, nonce) WHERE nonce <> '';

CREATE TABLE policy_bundles (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL,
    version     TEXT NOT NULL,
    digest      TEXT NOT NULL CHECK (length(digest) = 64),
    content     BLOB NOT NULL,
    recorded_at INTEGER NOT NULL,
    UNIQUE (id, version)
);

CREATE TRIGGER sessions_no_update BEFORE UPDATE ON sessions
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on sessions refused: the table is append-only'); END;
CREATE TRIGGER sessions_no_delete BEFORE DELETE ON sessions
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on sessions refused: the table is append-only'); END;
CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on entries refused: the table is append-only'); END;
CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on entries refused: the table is append-only'); END;
CREATE TRIGGER heads_no_delete BEFORE DELETE ON heads
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on heads refused: the table is append-only'); END;
CREATE TRIGGER heads_forward BEFORE UPDATE ON heads
WHEN NEW.session_id <> OLD.session_id OR NEW.length <= OLD.length
BEGIN SELECT RAISE(ABORT, 'acsledger: a session head may only move forward'); END;
CREATE TRIGGER responses_no_update BEFORE UPDATE ON responses
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on responses refused: the table is append-only'); END;
CREATE TRIGGER responses_no_delete BEFORE DELETE ON responses
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on responses refused: the table is append-only'); END;
CREATE TRIGGER requests_no_update BEFORE UPDATE ON requests
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on requests refused: the table is append-only'); END;
CREATE TRIGGER requests_no_delete BEFORE DELETE ON requests
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on requests refused: the table is append-only'); END;
CREATE TRIGGER policy_bundles_no_update BEFORE UPDATE ON policy_bundles
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on policy_bundles refused: the table is append-only'); END;
CREATE TRIGGER policy_bundles_no_delete BEFORE DELETE ON policy_bundles
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on policy_bundles refused: the table is append-only'); END;
