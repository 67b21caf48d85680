-- 0018: the Merkle log's leaves by session, through a table of (session,
-- tile) pairs instead of an expression index over every leaf. Run as the
-- owner role.
--
-- 0008 indexed tlog_leaves on tlog_leaf_session(data): each leaf written
-- paid a jsonb parse of its data and a text btree insert, about 5 us of
-- PostgreSQL CPU per leaf, which took the integration benchmark from
-- ~130k to ~85k leaves/s and the log from 322 to 390 bytes per leaf
-- (docs/benchmarks.md, Merkle log). The readers (LogSessionLeaves,
-- LogLastSessionLeaf: verification holding a session against the log,
-- bundle anchoring) now find a session's tiles of 256 leaves here and
-- read those leaves by index, keeping only the ones whose own data names
-- the session.
--
-- The integrator writes a session's pairs in the transaction of the
-- leaves, from the same value it encodes into each leaf's data
-- (ledger/tlog StoredLeaf.SessionID), never from entries: as with 0008, a
-- row deleted from entries cannot take its leaf out of the index. A
-- session with leaves in a tile written by two batches gets one row (ON
-- CONFLICT DO NOTHING). Rows are never changed or deleted.

CREATE TABLE tlog_session_tiles (
    session_id text NOT NULL,
    tile       bigint NOT NULL CHECK (tile >= 0),
    PRIMARY KEY (session_id, tile)
);

INSERT INTO tlog_session_tiles (session_id, tile)
SELECT DISTINCT tlog_leaf_session(data), idx / 256 FROM tlog_leaves
WHERE tlog_leaf_session(data) IS NOT NULL;

DROP INDEX tlog_leaves_session;

CREATE TRIGGER tlog_session_tiles_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tlog_session_tiles
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();

REVOKE ALL ON tlog_session_tiles FROM PUBLIC;
GRANT SELECT, INSERT ON tlog_session_tiles TO acsledger_writer;
