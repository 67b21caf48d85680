-- Merkle log storage (logstorage.go); the writes of leaves and tiles are
-- the driver's (Driver.WriteLeaves).

-- name: LogSize
SELECT coalesce(max(idx) + 1, 0) FROM tlog_leaves;

-- name: LogLeaves
SELECT idx, data FROM tlog_leaves WHERE idx >= $1 AND idx < $2 ORDER BY idx;

-- name: LogFullTile
SELECT data FROM tlog_tiles WHERE level = $1 AND idx = $2;

-- name: LogTileRoots
SELECT root FROM tlog_tiles WHERE level = $1 AND idx >= $2 AND idx < $3 ORDER BY idx;

-- name: LogLeafIndexByPosition
SELECT l.idx FROM entries e JOIN tlog_leaves l ON l.entry_id = e.id
WHERE e.session_id = $1 AND e.position = $2;

-- name: LogLeafIndexByEntryHash
SELECT idx FROM tlog_leaves WHERE entry_hash = $1 ORDER BY idx LIMIT 1;

-- name: LogCheckpoint
SELECT note FROM tlog_checkpoints WHERE size = $1;

-- name: LogFirstCheckpointAfter
-- The smallest signed tree that holds leaf $1: the checkpoint that first
-- covered it (a range scan of the primary key, one row).
SELECT size, note FROM tlog_checkpoints WHERE size > $1 ORDER BY size LIMIT 1;

-- name: LogCosignatures
SELECT line FROM tlog_cosignatures WHERE size = $1 ORDER BY created_at, line;

-- name: LogAddTimestamp
INSERT INTO tlog_timestamps (size, response, stamped_at) VALUES ($1, $2, $3) ON CONFLICT (size) DO NOTHING;

-- name: LogTimestamp
SELECT response FROM tlog_timestamps WHERE size = $1;

-- name: LogLastStamped
SELECT size FROM tlog_timestamps ORDER BY size DESC LIMIT 1;

-- name: LogUnstamped
-- The stamper keeps after at the last stamped size, so the range read is
-- the gap, not the whole history.
SELECT c.size, c.note FROM tlog_checkpoints c
WHERE c.size > $1 AND NOT EXISTS (SELECT 1 FROM tlog_timestamps t WHERE t.size = c.size)
ORDER BY c.size LIMIT $2;

-- name: LogCosignedSizes
SELECT DISTINCT size FROM tlog_cosignatures WHERE size < $1 ORDER BY size DESC LIMIT $2;
