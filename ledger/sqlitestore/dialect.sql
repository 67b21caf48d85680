-- The store's queries (ledger/internal/sqlstore) whose SQLite text differs
-- from PostgreSQL's beyond placeholders. Times are Unix microseconds, a
-- day 86400000000 of them; lists are JSON arrays.

-- name: DailyDecisions
-- A day is the microsecond its UTC day starts.
SELECT recorded_at / 86400000000 * 86400000000 AS day, disposition, count(*)
FROM search_entries
WHERE recorded_at >= ?1 AND agent_id <> ?2
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: DailySessions
SELECT created_at / 86400000000 * 86400000000 AS day, count(*)
FROM sessions
WHERE created_at >= ?1 AND agent_id <> ?2
GROUP BY 1
ORDER BY 1;

-- name: HasQuarantine
SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'ingest_quarantine';

-- name: IngestedByKey
-- A record's flags are rows of ingest_flags, here a JSON array in the
-- order they were written, NULL for none.
SELECT r.source, r.natural_key, r.digest, r.session_id, r.position, r.entry_hash,
    (SELECT NULLIF(json_group_array(g.flag ORDER BY g.rowid), '[]') FROM ingest_flags g WHERE g.record_seq = r.seq),
    r.seq, r.file, r.record, r.recorded_at
FROM ingest_records r WHERE r.source = ?1 AND r.natural_key = ?2;

-- name: Flagged
SELECT r.source, r.natural_key, r.digest, r.session_id, r.position, r.entry_hash,
    (SELECT NULLIF(json_group_array(g.flag ORDER BY g.rowid), '[]') FROM ingest_flags g WHERE g.record_seq = r.seq),
    r.seq, r.file, r.record, r.recorded_at
FROM ingest_flags f JOIN ingest_records r ON r.seq = f.record_seq
WHERE f.flag = ?1 AND f.record_seq > ?2 AND (?3 = '' OR r.source = ?3)
ORDER BY f.record_seq
LIMIT ?4;

-- name: LogPending
SELECT p.entry_id, e.session_id, e.position, e.entry_hash
FROM tlog_pending p JOIN entries e ON e.id = p.entry_id
WHERE p.entry_id > ?1 ORDER BY p.entry_id LIMIT ?2;

-- name: LogSessionLeaves
-- As in the Postgres store: at most ?4 of the session's tiles (migration
-- 0018), then their leaves whose own data names the session.
WITH t AS (
    SELECT tile FROM tlog_session_tiles
    WHERE session_id = ?1 AND tile >= ?2 / 256 AND tile <= (?3 - 1) / 256
    ORDER BY tile LIMIT ?4
)
SELECT l.idx, l.data
FROM t JOIN tlog_leaves l ON l.idx >= t.tile * 256 AND l.idx < t.tile * 256 + 256
WHERE l.idx >= ?2 AND l.idx < ?3 AND json_extract(CAST(l.data AS TEXT), '$.session_id') = ?1
ORDER BY l.idx LIMIT ?4;

-- name: LogLastSessionLeaf
WITH t AS (
    SELECT tile FROM tlog_session_tiles
    WHERE session_id = ?1 AND tile <= (?2 - 1) / 256
    ORDER BY tile DESC LIMIT 2
)
SELECT l.idx, l.data
FROM t JOIN tlog_leaves l ON l.idx >= t.tile * 256 AND l.idx < t.tile * 256 + 256
WHERE l.idx < ?2 AND json_extract(CAST(l.data AS TEXT), '$.session_id') = ?1
ORDER BY l.idx DESC LIMIT 1;

-- The one-row tlog_head is keyed singleton = 1; the checkpoints and
-- cosignatures take created_at from the statement (Dialect.StampsRows).

-- name: LogLatestCheckpoint
SELECT note FROM tlog_head WHERE singleton = 1;

-- name: LogInsertCheckpoint
INSERT INTO tlog_checkpoints (size, note, created_at) VALUES (?1, ?2, ?3);

-- name: LogMoveHead
UPDATE tlog_head SET size = ?1, note = ?2 WHERE singleton = 1 AND size = ?3;

-- name: LogInsertHead
INSERT INTO tlog_head (singleton, size, note) VALUES (1, ?1, ?2) ON CONFLICT DO NOTHING;

-- name: LogAddCosignature
INSERT INTO tlog_cosignatures (size, line, created_at) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING;

-- name: ExportEntries
-- Export in the Merkle log's order (migration 0020, docs/export.md).
-- ?1, ?2: the leaf range [from, to); ?3: an agent-id prefix, '' for all;
-- ?4: the page size; ?5: read the request params too.
SELECT l.idx, e.session_id, e.position, e.entry_hash, s.agent_id,
    coalesce(se.source, s.writer), e.recorded_at, e.content, r.response,
    CASE WHEN ?5 THEN p.params END
FROM tlog_leaves l
JOIN entries e ON e.id = l.entry_id
JOIN sessions s ON s.session_id = e.session_id
LEFT JOIN search_entries se ON se.session_id = e.session_id AND se.position = e.position
LEFT JOIN responses r ON r.session_id = e.session_id AND r.position = e.position
LEFT JOIN request_params p ON ?5 AND p.session_id = e.session_id AND p.position = e.position
WHERE l.idx >= ?1 AND l.idx < ?2 AND (?3 = '' OR substr(s.agent_id, 1, length(?3)) = ?3)
ORDER BY l.idx
LIMIT ?4;
-- name: EraseParamsBatch
-- sqlstore.EraseBatch's statement (ledger/internal/sqlstore/retention.sql
-- describes it). SQLite looks the page's keys up through the row-value IN,
-- which its planner serves from request_params' primary key; joined from a
-- VALUES table instead, it scanned request_params.
INSERT INTO erasures (session_id, position, erased_at, reason, erased_by, run_id)
SELECT p.session_id, p.position, ?1, ?2, ?3, ?4
FROM request_params p
JOIN entries e ON e.session_id = p.session_id AND e.position = p.position
JOIN sessions s ON s.session_id = p.session_id
WHERE (p.session_id, p.position) IN (VALUES /*keys*/)
  AND e.recorded_at < ?5
  AND (?6 = '' OR substr(s.agent_id, 1, length(?6)) = ?6)
  AND (?7 = '' OR e.step_type = ?7)
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
-- 0019); ?8 is a source format ('' for any), matched against the entry's
-- own source_format member.
INSERT INTO source_erasures (session_id, position, erased_at, reason, erased_by, run_id)
SELECT r.session_id, r.position, ?1, ?2, ?3, ?4
FROM source_records r
JOIN entries e ON e.session_id = r.session_id AND e.position = r.position
JOIN sessions s ON s.session_id = r.session_id
WHERE (r.session_id, r.position) IN (VALUES /*keys*/)
  AND e.recorded_at < ?5
  AND (?6 = '' OR substr(s.agent_id, 1, length(?6)) = ?6)
  AND (?7 = '' OR e.step_type = ?7)
  AND (?8 = '' OR json_extract(CAST(e.content AS TEXT), '$.source_format') = ?8)
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
-- OldestPayload for the source records (?3 a source format, '' for any).
SELECT e.recorded_at
FROM source_records r
JOIN entries e ON e.session_id = r.session_id AND e.position = r.position
JOIN sessions s ON s.session_id = r.session_id
WHERE (?1 = '' OR substr(s.agent_id, 1, length(?1)) = ?1)
  AND (?2 = '' OR e.step_type = ?2)
  AND (?3 = '' OR json_extract(CAST(e.content AS TEXT), '$.source_format') = ?3)
ORDER BY e.recorded_at
LIMIT 1;
