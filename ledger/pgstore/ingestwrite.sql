-- Named queries of the PostgreSQL store's ingest writes (ingestwrite.go)
-- (ledger.IngestStore, migrations/postgres/0007_ingest.sql); the reads
-- are ledger/internal/sqlstore's.

-- name: IngestedKeys
SELECT r.source, r.natural_key, r.digest, r.session_id, r.position, r.entry_hash,
    r.flags, r.seq, r.file, r.record, r.recorded_at
FROM ingest_records r
JOIN unnest($1::text[], $2::text[]) AS k (source, natural_key)
  ON r.source = k.source AND r.natural_key = k.natural_key;

-- name: IngestedReplayKeys
SELECT r.source, r.replay_key, r.natural_key
FROM ingest_records r
JOIN unnest($1::text[], $2::text[]) AS k (source, replay_key)
  ON r.source = k.source AND r.replay_key = k.replay_key;

-- name: InsertIngestRecords
-- $9: comma-separated flags per record ('' for none).
INSERT INTO ingest_records (source, natural_key, replay_key, digest, session_id, position,
    entry_hash, flags, file, record, recorded_at)
SELECT u.source, u.natural_key, NULLIF(u.replay_key, ''), u.digest, u.session_id, u.position,
    u.entry_hash, coalesce(string_to_array(NULLIF(u.flags, ''), ','), '{}'), u.file, u.record, $11
FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::text[], $6::bigint[],
    $7::bytea[], $8::text[], $9::text[], $10::bigint[])
    AS u (source, natural_key, replay_key, digest, session_id, position, entry_hash, file, flags, record);

-- name: InsertQuarantine
INSERT INTO ingest_quarantine (source, natural_key, file, record, reason, detail, raw,
    raw_sha256, quarantined_at)
SELECT u.source, u.natural_key, u.file, u.record, u.reason, u.detail, u.raw,
    sha256(u.raw), $8
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::bytea[])
    AS u (source, natural_key, file, record, reason, detail, raw)
ON CONFLICT (source, file, record, raw_sha256) DO NOTHING;

