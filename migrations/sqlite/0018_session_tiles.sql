-- 0018: the Merkle log's leaves by session through (session, tile) pairs.
-- Mirrors postgres/0018_session_tiles.sql: the integrator writes the pairs
-- with the leaves, from the session each leaf's data names; readers find a
-- session's tiles here and keep the leaves whose data names it.

CREATE TABLE tlog_session_tiles (
    session_id TEXT NOT NULL,
    tile       INTEGER NOT NULL CHECK (tile >= 0),
    PRIMARY KEY (session_id, tile)
) WITHOUT ROWID;

INSERT INTO tlog_session_tiles (session_id, tile)
SELECT DISTINCT json_extract(CAST(data AS TEXT), '$.session_id'), idx / 256 FROM tlog_leaves
WHERE json_extract(CAST(data AS TEXT), '$.session_id') IS NOT NULL;

DROP INDEX tlog_leaves_session;

CREATE TRIGGER tlog_session_tiles_no_update BEFORE UPDATE ON tlog_session_tiles
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on tlog_session_tiles refused: the table is append-only'); END;
CREATE TRIGGER tlog_session_tiles_no_delete BEFORE DELETE ON tlog_session_tiles
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on tlog_session_tiles refused: the table is append-only'); END;
