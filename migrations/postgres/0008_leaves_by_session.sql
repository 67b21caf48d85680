-- 0008: the Merkle log's leaves by session. Run as the owner role.
--
-- Verification holds every session against the log: each leaf the log
-- holds for a session must name an entry the store still has, with that
-- entry_hash (ledger/evidence). The leaves' own bytes say which session
-- they belong to (ledger/tlog Leaf, canonical JSON), so the index reads the
-- session from them and not from entries: a row deleted from entries must
-- not take its leaf out of the index with it.

-- tlog_leaf_session is the session_id member of a leaf's data. convert_from
-- with an explicit encoding does not depend on any setting, so the
-- function is immutable, as an index expression must be.
CREATE FUNCTION tlog_leaf_session(data bytea) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT pg_catalog.convert_from(data, 'UTF8')::pg_catalog.jsonb ->> 'session_id' $$;

CREATE INDEX tlog_leaves_session ON tlog_leaves (tlog_leaf_session(data), idx);

GRANT EXECUTE ON FUNCTION tlog_leaf_session(bytea) TO acsledger_writer;
