-- The store's queries (ledger/internal/sqlstore) whose PostgreSQL text
-- differs from SQLite's beyond placeholders.

-- name: DailyDecisions
-- $1: since; $2: an agent left out (the access log). Reads the search
-- projection (migration 0010) through its recorded_at index.
SELECT date_trunc('day', recorded_at AT TIME ZONE 'UTC') AS day, disposition, count(*)
FROM search_entries
WHERE recorded_at >= $1 AND agent_id <> $2
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: DailySessions
SELECT date_trunc('day', created_at AT TIME ZONE 'UTC') AS day, count(*)
FROM sessions
WHERE created_at >= $1 AND agent_id <> $2
GROUP BY 1
ORDER BY 1;

-- name: HasQuarantine
-- The ingest quarantine (migration 0007) when this database has it.
SELECT to_regclass('ingest_quarantine') IS NOT NULL;

-- name: IngestedByKey
SELECT source, natural_key, digest, session_id, position, entry_hash, flags, seq, file, record, recorded_at
FROM ingest_records WHERE source = $1 AND natural_key = $2;

-- name: Flagged
SELECT source, natural_key, digest, session_id, position, entry_hash, flags, seq, file, record, recorded_at
FROM ingest_records
WHERE flags <> '{}' AND flags @> ARRAY[$1::text] AND seq > $2 AND ($3::text = '' OR source = $3)
ORDER BY seq
LIMIT $4;

-- name: LogPending
-- The queue names each entry's session (migration 0011), so each lookup
-- reads one partition of entries.
SELECT p.entry_id, e.session_id, e.position, e.entry_hash
FROM tlog_pending p JOIN entries e ON e.session_id = p.session_id AND e.id = p.entry_id
WHERE p.entry_id > $1 ORDER BY p.entry_id LIMIT $2;

-- name: LogSessionLeaves
-- The session's tiles (migration 0018), then the leaves of those tiles
-- whose own data names the session, never a lookup in entries. Every tile
-- listed holds at least one leaf of the session, so $4 tiles hold the
-- first $4 leaves: a page reads at most $4 tiles of 256 leaves, however
-- long the session.
WITH t AS (
    SELECT tile FROM tlog_session_tiles
    WHERE session_id = $1 AND tile >= $2::bigint / 256 AND tile <= ($3::bigint - 1) / 256
    ORDER BY tile LIMIT $4
)
SELECT l.idx, l.data
FROM t JOIN tlog_leaves l ON l.idx >= t.tile * 256 AND l.idx < t.tile * 256 + 256
WHERE l.idx >= $2 AND l.idx < $3 AND tlog_leaf_session(l.data) = $1
ORDER BY l.idx LIMIT $4;

-- name: LogLastSessionLeaf
-- The last two of the session's tiles below $2: the last may hold only
-- leaves at or above $2, the one before holds one below it.
WITH t AS (
    SELECT tile FROM tlog_session_tiles
    WHERE session_id = $1 AND tile <= ($2::bigint - 1) / 256
    ORDER BY tile DESC LIMIT 2
)
SELECT l.idx, l.data
FROM t JOIN tlog_leaves l ON l.idx >= t.tile * 256 AND l.idx < t.tile * 256 + 256
WHERE l.idx < $2 AND tlog_leaf_session(l.data) = $1
ORDER BY l.idx DESC LIMIT 1;

-- The one-row tlog_head and the checkpoints' created_at take their
-- column defaults.

-- name: LogLatestCheckpoint
SELECT note FROM tlog_head;

-- name: LogInsertCheckpoint
INSERT INTO tlog_checkpoints (size, note) VALUES ($1, $2);

-- name: LogMoveHead
UPDATE tlog_head SET size = $1, note = $2 WHERE size = $3;

-- name: LogInsertHead
INSERT INTO tlog_head (size, note) VALUES ($1, $2) ON CONFLICT DO NOTHING;

-- name: LogAddCosignature
INSERT INTO tlog_cosignatures (size, line) VALUES ($1, $2) ON CONFLICT DO NOTHING;
