-- Named queries of the PostgreSQL store's write path (append.go,
-- driver.go, ingestwrite.go); the reads and the rest are
-- ledger/internal/sqlstore's, with this driver's wording in dialect.sql. Writes take arrays and unnest
-- them, so a batch of any size is one round trip per statement.

-- name: LockSessions
-- A transaction-scoped advisory lock per session a transaction appends to
-- ($1: the sessions' lock keys, sorted), taken before it reads any head.
-- Two processes appending to one session then take turns: without it the
-- second kept planning on a head the first was about to move, lost the
-- compare-and-swap (or the unique position) and re-planned in step with
-- it. All of a transaction's keys are taken at once and in one order, so
-- two transactions never wait on each other in a cycle. The head moves
-- stay compare-and-swap; the lock only takes writers out of each other's
-- way.
SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k;

-- name: SessionStates
SELECT s.session_id, s.agent_id, s.writer, h.length, h.head
FROM sessions s JOIN heads h ON h.session_id = s.session_id
WHERE s.session_id = ANY($1::text[]);

-- name: StoredBySteps
-- One unique-key lookup per (session, step) asked for. As a join, the plan
-- the statement cache kept from the ledger's first minutes, when the
-- partitions were empty, hashed the keys and scanned every partition of
-- entries on each call, growing with the ledger until the next ANALYZE;
-- LIMIT 1 (the key is unique) keeps the subquery a subquery, so each key
-- is looked up in its one partition, the others pruned at run time, by
-- the (session_id, step_id) index once the partition is large enough to
-- call for it (TestStoredByStepsPlan).
SELECT k.session_id, k.step_id, e.position, e.entry_hash, e.previous_hash, e.content
FROM unnest($1::text[], $2::text[]) AS k (session_id, step_id)
CROSS JOIN LATERAL (
    SELECT e.position, e.entry_hash, e.previous_hash, e.content
    FROM entries e
    WHERE e.session_id = k.session_id AND e.step_id = k.step_id
    LIMIT 1
) e;

-- name: InsertSessions
-- ON CONFLICT: a concurrent writer created the session first; the caller
-- sees fewer rows than it asked for and retries from the new state.
INSERT INTO sessions (session_id, agent_id, writer, created_at)
SELECT u.session_id, u.agent_id, u.writer, $4
FROM unnest($1::text[], $2::text[], $3::text[]) AS u (session_id, agent_id, writer)
ON CONFLICT (session_id) DO NOTHING;

-- name: WriteGroup
-- Everything one group commit writes after planning, in one statement:
-- the new sessions ($1-$3) and their heads ($4-$6), the compare-and-swap
-- of every moved head ($7-$11), the entries ($12-$20), the signed
-- responses ($21-$23) and the sealed params with their tool names
-- ($24-$27), all recorded at $28. It returns how many rows each part
-- wrote; the caller compares them with what it planned, since a shortfall
-- in sessions or moved heads means a concurrent writer got there first
-- (ON CONFLICT skips a session created meanwhile; a head no longer at the
-- planned (length, head) does not move). Foreign keys and the triggers
-- are checked at the end of the statement, as for separate statements at
-- the end of each, so a response or params row still needs its entry,
-- and the search projection of an entry reads its params' tool name
-- written here (migration 0012).
WITH new_sessions AS (
    INSERT INTO sessions (session_id, agent_id, writer, created_at)
    SELECT u.session_id, u.agent_id, u.writer, $28
    FROM unnest($1::text[], $2::text[], $3::text[]) AS u (session_id, agent_id, writer)
    ON CONFLICT (session_id) DO NOTHING
    RETURNING 1
), new_heads AS (
    INSERT INTO heads (session_id, length, head, updated_at)
    SELECT u.session_id, u.length, u.head, $28
    FROM unnest($4::text[], $5::bigint[], $6::bytea[]) AS u (session_id, length, head)
    RETURNING 1
), moved_heads AS (
    UPDATE heads h
    SET length = u.to_length, head = u.to_head, updated_at = $28
    FROM unnest($7::text[], $8::bigint[], $9::bytea[], $10::bigint[], $11::bytea[])
        AS u (session_id, from_length, from_head, to_length, to_head)
    WHERE h.session_id = u.session_id AND h.length = u.from_length AND h.head = u.from_head
    RETURNING 1
), new_entries AS (
    INSERT INTO entries (session_id, position, entry_hash, previous_hash, entry_id,
        step_id, step_type, entry_timestamp, recorded_at, content)
    SELECT u.session_id, u.position, u.entry_hash, u.previous_hash, u.entry_id,
        u.step_id, u.step_type, u.entry_timestamp, $28, u.content
    FROM unnest($12::text[], $13::bigint[], $14::bytea[], $15::bytea[], $16::text[],
        $17::text[], $18::text[], $19::text[], $20::bytea[])
        AS u (session_id, position, entry_hash, previous_hash, entry_id,
            step_id, step_type, entry_timestamp, content)
    RETURNING 1
), new_responses AS (
    INSERT INTO responses (session_id, position, response, recorded_at)
    SELECT u.session_id, u.position, u.response, $28
    FROM unnest($21::text[], $22::bigint[], $23::bytea[]) AS u (session_id, position, response)
    RETURNING 1
), new_params AS (
    INSERT INTO request_params (session_id, position, params, recorded_at, tool_name)
    SELECT u.session_id, u.position, u.params, $28, u.tool_name
    FROM unnest($24::text[], $25::bigint[], $26::bytea[], $27::text[]) AS u (session_id, position, params, tool_name)
    RETURNING 1
)
SELECT (SELECT count(*) FROM new_sessions), (SELECT count(*) FROM new_heads),
    (SELECT count(*) FROM moved_heads), (SELECT count(*) FROM new_entries),
    (SELECT count(*) FROM new_responses), (SELECT count(*) FROM new_params);

-- The Merkle log's writes (driver.go, WriteLeaves). Leaves are written
-- with COPY into tlog_leaves (idx, entry_id, entry_hash, data), which has
-- no SQL text.

-- name: LogDequeue
DELETE FROM tlog_pending WHERE entry_id = ANY($1);

-- name: LogInsertSessionTiles
-- Migration 0018: a tile's session written by an earlier batch is there.
INSERT INTO tlog_session_tiles (session_id, tile)
SELECT * FROM unnest($1::text[], $2::bigint[])
ON CONFLICT DO NOTHING;

-- name: LogInsertTiles
INSERT INTO tlog_tiles (level, idx, data, root)
SELECT * FROM unnest($1::smallint[], $2::bigint[], $3::bytea[], $4::bytea[]);

-- Ingest writes (ingestwrite.go; ledger.IngestStore, migrations/*/0007_ingest.sql).

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


-- name: InsertSources
-- The source records of a batch's ingested entries (migration 0015),
-- sealed by the store.
INSERT INTO source_records (session_id, position, source_sha256, record, recorded_at)
SELECT u.session_id, u.position, u.source_sha256, u.record, $5
FROM unnest($1::text[], $2::bigint[], $3::bytea[], $4::bytea[])
    AS u (session_id, position, source_sha256, record);

-- name: SearchByStore
-- Whether the store writes this transaction's search rows itself ('on')
-- or leaves them to the projection trigger ('off'), migration 0022.
SELECT set_config('acsledger.search_by_store', $1, true);
