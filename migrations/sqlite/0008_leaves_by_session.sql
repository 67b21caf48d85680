-- 0008: the Merkle log's leaves by session. Mirrors
-- postgres/0008_leaves_by_session.sql: the index reads the session from the
-- leaf's own bytes, never from entries, so deleting an entry cannot hide
-- its leaf. Queries must use the same expression to use the index.
CREATE INDEX tlog_leaves_session ON tlog_leaves (json_extract(CAST(data AS TEXT), '$.session_id'), idx);
