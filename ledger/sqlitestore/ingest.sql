-- Named queries of the SQLite store's ingest support
-- (ledger.IngestStore, migrations/sqlite/0007_ingest.sql).

-- name: IngestedKey
SELECT source, natural_key, digest, session_id, position, entry_hash, seq, file, record, recorded_at
FROM ingest_records WHERE source = ? AND natural_key = ?;

-- name: IngestedReplayKey
SELECT natural_key FROM ingest_records WHERE source = ? AND replay_key = ?;

-- name: IngestFlags
SELECT flag FROM ingest_flags WHERE record_seq = ? ORDER BY rowid;

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

-- name: Quarantined
SELECT seq, source, natural_key, file, record, reason, detail, raw, quarantined_at
FROM ingest_quarantine
WHERE seq > ? AND (? = '' OR source = ?)
ORDER BY seq
LIMIT ?;

-- name: Flagged
SELECT r.source, r.natural_key, r.digest, r.session_id, r.position, r.entry_hash, r.seq, r.file,
    r.record, r.recorded_at
FROM ingest_flags f JOIN ingest_records r ON r.seq = f.record_seq
WHERE f.flag = ? AND f.record_seq > ? AND (? = '' OR r.source = ?)
ORDER BY f.record_seq
LIMIT ?;
