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
-- The queue carries what a leaf needs (migration 0021): no lookup in
-- entries.
SELECT entry_id, session_id, position, entry_hash
FROM tlog_pending
WHERE entry_id > $1 ORDER BY entry_id LIMIT $2;

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

-- name: ExportEntries
-- Export in the Merkle log's order (migration 0020, docs/export.md). The
-- session is read from the leaf (migration 0008's function), so each
-- entry lookup reads one partition of entries. $1, $2: the leaf range
-- [from, to); $3: an agent-id prefix, '' for all; $4: the page size;
-- $5: read the request params too.
SELECT l.idx, e.session_id, e.position, e.entry_hash, s.agent_id,
    coalesce(se.source, s.writer), e.recorded_at, e.content, r.response,
    CASE WHEN $5::boolean THEN p.params END
FROM tlog_leaves l
JOIN entries e ON e.session_id = tlog_leaf_session(l.data) AND e.id = l.entry_id
JOIN sessions s ON s.session_id = e.session_id
LEFT JOIN search_entries se ON se.session_id = e.session_id AND se.position = e.position
LEFT JOIN responses r ON r.session_id = e.session_id AND r.position = e.position
LEFT JOIN request_params p ON $5::boolean AND p.session_id = e.session_id AND p.position = e.position
WHERE l.idx >= $1 AND l.idx < $2 AND ($3::text = '' OR starts_with(s.agent_id, $3))
ORDER BY l.idx
LIMIT $4;
-- name: EraseParamsBatch
-- sqlstore.EraseBatch's statement; SQLite words it its own way.
-- Records the erasure of each params row of the page whose keys ParamsKeys
-- read in this transaction (the store puts them in place of the keys
-- marker as (CAST($n AS TEXT), CAST($n+1 AS BIGINT)) pairs, from $8), if
-- it is still stored, in scope and under no standing hold. The page's keys
-- drive the statement: each is looked up by key in request_params, entries
-- and sessions, however large those are.
WITH k (session_id, position) AS (VALUES /*keys*/)
INSERT INTO erasures (session_id, position, erased_at, reason, erased_by, run_id)
SELECT p.session_id, p.position, $1::timestamptz, $2::text, $3::text, $4::text
FROM k
JOIN request_params p ON p.session_id = k.session_id AND p.position = k.position
JOIN entries e ON e.session_id = k.session_id AND e.position = k.position
JOIN sessions s ON s.session_id = k.session_id
WHERE e.recorded_at < $5::timestamptz
  AND ($6::text = '' OR substr(s.agent_id, 1, length($6::text)) = $6::text)
  AND ($7::text = '' OR e.step_type = $7::text)
  AND NOT EXISTS (
        SELECT 1 FROM legal_holds h
        WHERE h.released_at IS NULL
          AND (h.agent_prefix = '' OR substr(s.agent_id, 1, length(h.agent_prefix)) = h.agent_prefix)
          AND (h.from_time IS NULL OR e.recorded_at >= h.from_time)
          AND (h.until_time IS NULL OR e.recorded_at < h.until_time)
          AND (h.session_count = 0 OR EXISTS (
                SELECT 1 FROM legal_hold_sessions hs WHERE hs.hold_id = h.id AND hs.session_id = s.session_id)))
ON CONFLICT (session_id, position) DO NOTHING
RETURNING session_id, position;

-- name: EraseSourceBatch
-- EraseParamsBatch for the source records of ingested entries (0015,
-- 0019): the page is what SourceKeys read, the keys marker is filled from
-- $9, and $8 is a source format ('' for any), matched against the
-- entry's own source_format member, the evidence that names it.
WITH k (session_id, position) AS (VALUES /*keys*/)
INSERT INTO source_erasures (session_id, position, erased_at, reason, erased_by, run_id)
SELECT r.session_id, r.position, $1::timestamptz, $2::text, $3::text, $4::text
FROM k
JOIN source_records r ON r.session_id = k.session_id AND r.position = k.position
JOIN entries e ON e.session_id = k.session_id AND e.position = k.position
JOIN sessions s ON s.session_id = k.session_id
WHERE e.recorded_at < $5::timestamptz
  AND ($6::text = '' OR substr(s.agent_id, 1, length($6::text)) = $6::text)
  AND ($7::text = '' OR e.step_type = $7::text)
  AND ($8::text = '' OR convert_from(e.content, 'UTF8')::jsonb ->> 'source_format' = $8::text)
  AND NOT EXISTS (
        SELECT 1 FROM legal_holds h
        WHERE h.released_at IS NULL
          AND (h.agent_prefix = '' OR substr(s.agent_id, 1, length(h.agent_prefix)) = h.agent_prefix)
          AND (h.from_time IS NULL OR e.recorded_at >= h.from_time)
          AND (h.until_time IS NULL OR e.recorded_at < h.until_time)
          AND (h.session_count = 0 OR EXISTS (
                SELECT 1 FROM legal_hold_sessions hs WHERE hs.hold_id = h.id AND hs.session_id = s.session_id)))
ON CONFLICT (session_id, position) DO NOTHING
RETURNING session_id, position;

-- name: OldestSource
-- OldestPayload for the source records: when the oldest one in a rule's
-- scope ($3 a source format, '' for any) was recorded.
SELECT e.recorded_at
FROM source_records r
JOIN entries e ON e.session_id = r.session_id AND e.position = r.position
JOIN sessions s ON s.session_id = r.session_id
WHERE ($1::text = '' OR substr(s.agent_id, 1, length($1::text)) = $1::text)
  AND ($2::text = '' OR e.step_type = $2::text)
  AND ($3::text = '' OR convert_from(e.content, 'UTF8')::jsonb ->> 'source_format' = $3::text)
ORDER BY e.recorded_at
LIMIT 1;
