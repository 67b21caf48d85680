-- Named queries of the SQLite store's write path (append.go, driver.go,
-- ingestwrite.go); the reads and the rest are ledger/internal/sqlstore's,
-- with this driver's wording in dialect.sql. Times are Unix microseconds.

-- name: SessionState
SELECT s.agent_id, s.writer, h.length, h.head
FROM sessions s JOIN heads h ON h.session_id = s.session_id
WHERE s.session_id = ?;

-- name: StoredByStep
SELECT position, entry_hash, previous_hash, content
FROM entries WHERE session_id = ? AND step_id = ?;

-- name: InsertSession
INSERT INTO sessions (session_id, agent_id, writer, created_at) VALUES (?, ?, ?, ?);

-- name: InsertHead
INSERT INTO heads (session_id, length, head, updated_at) VALUES (?, ?, ?, ?);

-- name: MoveHead
UPDATE heads SET length = ?, head = ?, updated_at = ?
WHERE session_id = ? AND length = ? AND head = ?;

-- name: InsertEntry
INSERT INTO entries (session_id, position, entry_hash, previous_hash, entry_id,
    step_id, step_type, entry_timestamp, recorded_at, content)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: InsertResponse
INSERT INTO responses (session_id, position, response, recorded_at) VALUES (?, ?, ?, ?);

-- name: InsertRequestParams
INSERT INTO request_params (session_id, position, params, recorded_at, tool_name) VALUES (?, ?, ?, ?, ?);

-- name: LogInsertLeaves
-- Multi-row: the caller appends one "(?, ?, ?, ?)" per leaf, comma-separated.
INSERT INTO tlog_leaves (idx, entry_id, entry_hash, data) VALUES

-- name: LogDequeue
-- The caller appends "(?, ?, ...)", one placeholder per entry id.
DELETE FROM tlog_pending WHERE entry_id IN

-- name: LogInsertSessionTiles
-- Migration 0018. Multi-row: the caller appends one "(?, ?)" per pair; a
-- tile's session written by an earlier batch is there.
INSERT OR IGNORE INTO tlog_session_tiles (session_id, tile) VALUES

-- name: LogInsertTile
INSERT INTO tlog_tiles (level, idx, data, root) VALUES (?, ?, ?, ?);

-- Ingest writes (ingestwrite.go; ledger.IngestStore, migrations/*/0007_ingest.sql).

-- name: IngestedReplayKey
SELECT natural_key FROM ingest_records WHERE source = ? AND replay_key = ?;

-- name: InsertIngestRecord
INSERT INTO ingest_records (source, natural_key, replay_key, digest, session_id, position,
    entry_hash, file, record, recorded_at)
VALUES (?, ?, NULLIF(?, ''), ?, ?, ?, ?, ?, ?, ?);

-- name: InsertIngestFlag
INSERT INTO ingest_flags (record_seq, flag) VALUES (?, ?);

-- name: InsertQuarantine
INSERT INTO ingest_quarantine (source, natural_key, file, record, reason, detail, raw,
    raw_sha256, quarantined_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (source, file, record, raw_sha256) DO NOTHING;


-- name: InsertSource
-- The source record of an ingested entry (migration 0015), sealed by the
-- store.
INSERT INTO source_records (session_id, position, source_sha256, record, recorded_at)
VALUES (?, ?, ?, ?, ?);
