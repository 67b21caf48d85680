-- 0003: the request params of Guardian steps, written beside the step's
-- entry in the same transaction and kept apart from what the chain commits
-- to (the entry holds only their request_hash). Append-only for now;
-- erasure is future work (docs/storage.md, "Request params").
CREATE TABLE request_params (
    session_id  TEXT NOT NULL,
    position    INTEGER NOT NULL,
    params      BLOB NOT NULL,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, position),
    FOREIGN KEY (session_id, position) REFERENCES entries (session_id, position)
);

CREATE TRIGGER request_params_no_update BEFORE UPDATE ON request_params
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on request_params refused: the table is append-only'); END;
CREATE TRIGGER request_params_no_delete BEFORE DELETE ON request_params
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on request_params refused: the table is append-only'); END;
