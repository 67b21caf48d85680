-- 0004: find an entry by its step_id alone (replay.FindEntry, behind
-- /api/v1/decisions/{request_id} and acsledger replay). Mirrors
-- postgres/0004_step_index.sql: UNIQUE (session_id, step_id) serves the
-- lookup within a session only, and session_id is the second key so that
-- "ORDER BY session_id LIMIT 2" reads at most two index entries. The build
-- holds the database's write lock, as every SQLite migration does.
CREATE INDEX entries_step_id ON entries (step_id, session_id);
