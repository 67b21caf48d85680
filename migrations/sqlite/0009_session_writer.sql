-- 0009: session ownership (postgres/0009_session_writer.sql says why).
-- Sessions created before this migration are the Guardian's when they
-- hold a signed response, external otherwise.
ALTER TABLE sessions ADD COLUMN writer TEXT NOT NULL DEFAULT 'external'
    CHECK (writer IN ('external', 'guardian'));

DROP TRIGGER sessions_no_update;
UPDATE sessions SET writer = 'guardian'
WHERE EXISTS (SELECT 1 FROM responses r WHERE r.session_id = sessions.session_id);
CREATE TRIGGER sessions_no_update BEFORE UPDATE ON sessions
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on sessions refused: the table is append-only'); END;
