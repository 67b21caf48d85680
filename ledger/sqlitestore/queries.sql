-- Named queries of the SQLite store. Times are Unix microseconds.

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

-- name: Session
SELECT s.session_id, s.agent_id, s.writer, h.length, h.head, s.created_at, h.updated_at
FROM sessions s JOIN heads h ON h.session_id = s.session_id
WHERE s.session_id = ?;

-- name: Sessions
SELECT s.seq, s.session_id, s.agent_id, s.writer, h.length, h.head, s.created_at, h.updated_at
FROM sessions s JOIN heads h ON h.session_id = s.session_id
WHERE s.seq > :after
  AND (:agent = '' OR s.agent_id = :agent)
  AND (:since IS NULL OR h.updated_at >= :since)
  AND (:until IS NULL OR s.created_at < :until)
  AND (:step_type = '' OR EXISTS (
        SELECT 1 FROM entries e WHERE e.session_id = s.session_id AND e.step_type = :step_type))
ORDER BY s.seq
LIMIT :limit;

-- name: Entries
SELECT position, entry_id, step_id, step_type, entry_timestamp, recorded_at,
    content, entry_hash, previous_hash
FROM entries
WHERE session_id = ? AND position >= ?
ORDER BY position
LIMIT ?;

-- name: EntriesByStep
-- The index entries_step_id (step_id, session_id) of migration 0004 gives
-- the rows in session_id order, so LIMIT stops after as many index entries
-- however many sessions reuse the step_id.
SELECT session_id, position, entry_id, step_id, step_type, entry_timestamp, recorded_at,
    content, entry_hash, previous_hash
FROM entries
WHERE step_id = ?
ORDER BY session_id
LIMIT ?;

-- name: EntryByStep
-- One session holds a step_id at most once (its unique key), which serves
-- this lookup.
SELECT session_id, position, entry_id, step_id, step_type, entry_timestamp, recorded_at,
    content, entry_hash, previous_hash
FROM entries
WHERE session_id = ? AND step_id = ?;

-- name: InsertResponse
INSERT INTO responses (session_id, position, response, recorded_at) VALUES (?, ?, ?, ?);

-- name: Response
SELECT response FROM responses WHERE session_id = ? AND position = ?;

-- name: InsertRequestParams
INSERT INTO request_params (session_id, position, params, recorded_at, tool_name) VALUES (?, ?, ?, ?, ?);

-- name: RequestParams
SELECT params FROM request_params WHERE session_id = ? AND position = ?;

-- name: RecordRequest
-- Either unique key (request_id, or a non-empty nonce) makes it a replay:
-- the caller sees no row inserted.
INSERT INTO requests (session_id, request_id, nonce, seen_at) VALUES (?, ?, ?, ?)
ON CONFLICT DO NOTHING;

-- name: InsertBundle
INSERT INTO policy_bundles (id, version, digest, content, recorded_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (id, version) DO NOTHING;

-- name: BundleDigest
SELECT digest FROM policy_bundles WHERE id = ? AND version = ?;

-- name: PolicyBundle
SELECT id, version, digest, content, recorded_at FROM policy_bundles WHERE id = ? AND version = ?;

-- name: PolicyBundles
SELECT id, version, digest, recorded_at FROM policy_bundles ORDER BY seq;

-- name: InsertErasure
-- Records the erasure only where params are stored and no erasure is: no
-- row inserted means there is nothing to erase, or it was erased already
-- (the caller reads Erasure to tell which).
INSERT INTO erasures (session_id, position, erased_at, reason, erased_by)
SELECT session_id, position, ?3, ?4, ?5
FROM request_params
WHERE session_id = ?1 AND position = ?2
ON CONFLICT (session_id, position) DO NOTHING;

-- name: DeleteRequestParams
-- Allowed by the trigger request_params_erased_only only after
-- InsertErasure, in the same transaction.
DELETE FROM request_params WHERE session_id = ? AND position = ?;

-- name: Erasure
SELECT erased_at, reason, erased_by FROM erasures WHERE session_id = ? AND position = ?;

-- Merkle log storage (logstorage.go).

-- name: LogPending
SELECT p.entry_id, e.session_id, e.position, e.entry_hash
FROM tlog_pending p JOIN entries e ON e.id = p.entry_id
WHERE p.entry_id > ? ORDER BY p.entry_id LIMIT ?;

-- name: LogSize
SELECT coalesce(max(idx) + 1, 0) FROM tlog_leaves;

-- name: LogInsertLeaves
-- Multi-row: the caller appends one "(?, ?, ?, ?)" per leaf, comma-separated.
INSERT INTO tlog_leaves (idx, entry_id, entry_hash, data) VALUES

-- name: LogDequeue
-- The caller appends "(?, ?, ...)", one placeholder per entry id.
DELETE FROM tlog_pending WHERE entry_id IN

-- name: LogInsertTile
INSERT INTO tlog_tiles (level, idx, data, root) VALUES (?, ?, ?, ?);

-- name: LogLeaves
SELECT idx, data FROM tlog_leaves WHERE idx >= ? AND idx < ? ORDER BY idx;

-- name: LogFullTile
SELECT data FROM tlog_tiles WHERE level = ? AND idx = ?;

-- name: LogTileRoots
SELECT root FROM tlog_tiles WHERE level = ? AND idx >= ? AND idx < ? ORDER BY idx;

-- name: LogLeafIndexByPosition
SELECT l.idx FROM entries e JOIN tlog_leaves l ON l.entry_id = e.id
WHERE e.session_id = ? AND e.position = ?;

-- name: LogSessionLeaves
-- The expression is the index's (migration 0008): the session is read from
-- the leaf's own data, never from entries.
SELECT idx, data FROM tlog_leaves
WHERE json_extract(CAST(data AS TEXT), '$.session_id') = ? AND idx >= ? AND idx < ? ORDER BY idx LIMIT ?;

-- name: LogLastSessionLeaf
SELECT idx, data FROM tlog_leaves
WHERE json_extract(CAST(data AS TEXT), '$.session_id') = ? AND idx < ? ORDER BY idx DESC LIMIT 1;

-- name: LogLeafIndexByEntryHash
SELECT idx FROM tlog_leaves WHERE entry_hash = ? ORDER BY idx LIMIT 1;

-- name: LogLatestCheckpoint
SELECT note FROM tlog_head WHERE singleton = 1;

-- name: LogInsertCheckpoint
INSERT INTO tlog_checkpoints (size, note, created_at) VALUES (?, ?, ?);

-- name: LogMoveHead
UPDATE tlog_head SET size = ?, note = ? WHERE singleton = 1 AND size = ?;

-- name: LogInsertHead
INSERT INTO tlog_head (singleton, size, note) VALUES (1, ?, ?) ON CONFLICT DO NOTHING;

-- name: LogCheckpoint
SELECT note FROM tlog_checkpoints WHERE size = ?;

-- name: LogAddCosignature
INSERT INTO tlog_cosignatures (size, line, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING;

-- name: LogCosignatures
SELECT line FROM tlog_cosignatures WHERE size = ? ORDER BY created_at, line;
