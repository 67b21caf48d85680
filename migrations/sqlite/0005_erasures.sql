-- 0005: erasure of request params. Mirrors postgres/0005_erasures.sql;
-- SQLite has no roles, so the triggers are the only enforcement: a row of
-- request_params may be deleted only once an erasures row for the same
-- (session_id, position) exists, inserted first in the same transaction
-- (ledger.GuardianStore.EraseParams); erasures itself is append-only.
-- Times are Unix microseconds.
CREATE TABLE erasures (
    session_id TEXT NOT NULL,
    position   INTEGER NOT NULL,
    erased_at  INTEGER NOT NULL,
    reason     TEXT NOT NULL CHECK (trim(reason) <> ''),
    erased_by  TEXT NOT NULL,
    PRIMARY KEY (session_id, position),
    FOREIGN KEY (session_id, position) REFERENCES entries (session_id, position)
);

CREATE TRIGGER erasures_no_update BEFORE UPDATE ON erasures
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on erasures refused: the table is append-only'); END;
CREATE TRIGGER erasures_no_delete BEFORE DELETE ON erasures
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on erasures refused: the table is append-only'); END;

DROP TRIGGER request_params_no_delete;
CREATE TRIGGER request_params_erased_only BEFORE DELETE ON request_params
WHEN NOT EXISTS (SELECT 1 FROM erasures WHERE session_id = OLD.session_id AND position = OLD.position)
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on request_params refused: the table is append-only, and no erasure is recorded for the row'); END;
