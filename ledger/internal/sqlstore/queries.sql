-- Named queries of the store (sqlstore.Queries), in PostgreSQL's
-- placeholders; SQLite reads "$n" and "$n::type" as "?n" (Dialect.Rewrite).

-- name: Session
SELECT s.session_id, s.agent_id, s.writer, h.length, h.head, s.created_at, h.updated_at
FROM sessions s JOIN heads h ON h.session_id = s.session_id
WHERE s.session_id = $1;

-- name: Sessions
SELECT s.seq, s.session_id, s.agent_id, s.writer, h.length, h.head, s.created_at, h.updated_at
FROM sessions s JOIN heads h ON h.session_id = s.session_id
WHERE s.seq > $1
  AND ($2::text = '' OR s.agent_id = $2)
  AND ($3::timestamptz IS NULL OR h.updated_at >= $3)
  AND ($4::timestamptz IS NULL OR s.created_at < $4)
  AND ($5::text = '' OR EXISTS (
        SELECT 1 FROM entries e WHERE e.session_id = s.session_id AND e.step_type = $5))
ORDER BY s.seq
LIMIT $6;

-- name: Entries
SELECT position, entry_id, step_id, step_type, entry_timestamp, recorded_at,
    content, entry_hash, previous_hash
FROM entries
WHERE session_id = $1 AND position >= $2
ORDER BY position
LIMIT $3;

-- name: EntriesByStep
-- The index entries_step_id (step_id, session_id) of migration 0004 gives
-- the rows in session_id order, so LIMIT stops after as many index entries
-- however many sessions reuse the step_id.
SELECT session_id, position, entry_id, step_id, step_type, entry_timestamp, recorded_at,
    content, entry_hash, previous_hash
FROM entries
WHERE step_id = $1
ORDER BY session_id
LIMIT $2;

-- name: EntryByStep
-- One session holds a step_id at most once (its unique key), which serves
-- this lookup.
SELECT session_id, position, entry_id, step_id, step_type, entry_timestamp, recorded_at,
    content, entry_hash, previous_hash
FROM entries
WHERE session_id = $1 AND step_id = $2;

-- name: Response
SELECT response FROM responses WHERE session_id = $1 AND position = $2;

-- name: RequestParams
SELECT params FROM request_params WHERE session_id = $1 AND position = $2;

-- name: RecordRequest
-- Either unique key (request_id, or a non-empty nonce) makes it a replay:
-- the caller sees no row inserted.
INSERT INTO requests (session_id, request_id, nonce, seen_at) VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING;

-- name: InsertBundle
INSERT INTO policy_bundles (id, version, digest, content, recorded_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id, version) DO NOTHING;

-- name: BundleDigest
SELECT digest FROM policy_bundles WHERE id = $1 AND version = $2;

-- name: PolicyBundle
SELECT id, version, digest, content, recorded_at FROM policy_bundles WHERE id = $1 AND version = $2;

-- name: PolicyBundles
SELECT id, version, digest, recorded_at FROM policy_bundles ORDER BY seq;

-- name: InsertErasure
-- Records the erasure only where params are stored and no erasure is:
-- no row back means there is nothing to erase, or it was erased already
-- (the caller reads Erasure to tell which).
INSERT INTO erasures (session_id, position, erased_at, reason, erased_by)
SELECT session_id, position, $3, $4, $5
FROM request_params
WHERE session_id = $1 AND position = $2
ON CONFLICT (session_id, position) DO NOTHING
RETURNING erased_at;

-- name: DeleteRequestParams
-- Allowed by the trigger request_params_erased_only only after
-- InsertErasure, in the same transaction.
DELETE FROM request_params WHERE session_id = $1 AND position = $2;

-- name: Erasure
SELECT erased_at, reason, erased_by FROM erasures WHERE session_id = $1 AND position = $2;

-- API tokens (migration 0006; ledger.TokenStore).

-- name: InsertToken
INSERT INTO api_tokens (name, token_sha256, role, scope, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6);

-- name: TokenByHash
SELECT name, token_sha256, role, scope, created_at, expires_at, revoked_at
FROM api_tokens WHERE token_sha256 = $1;

-- name: Tokens
SELECT name, token_sha256, role, scope, created_at, expires_at, revoked_at
FROM api_tokens ORDER BY name;

-- name: RevokeToken
UPDATE api_tokens SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL;

-- name: TokenExists
SELECT EXISTS (SELECT 1 FROM api_tokens WHERE name = $1);

-- The ingest quarantine (ledger.IngestStore, migration 0007).

-- name: Quarantined
SELECT seq, source, natural_key, file, record, reason, detail, raw, quarantined_at
FROM ingest_quarantine
WHERE seq > $1 AND ($2::text = '' OR source = $2)
ORDER BY seq
LIMIT $3;

-- name: ExportCursor
SELECT name, next_leaf, sending_to, delivered, sent_unconfirmed, redelivered, updated_at
FROM export_cursors WHERE name = $1;

-- name: ExportCursors
SELECT name, next_leaf, sending_to, delivered, sent_unconfirmed, redelivered, updated_at
FROM export_cursors ORDER BY name;

-- name: PutExportCursor
-- Compare-and-swap on next_leaf ($8, the cursor the caller read); a row
-- that is not there yet is created whatever $8 says. The columns keep
-- their 0020 names: delivered is ledger.ExportCursor.Acknowledged,
-- redelivered Resent, sending_to SentTo (migration 0023).
INSERT INTO export_cursors (name, next_leaf, sending_to, delivered, sent_unconfirmed, redelivered, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (name) DO UPDATE SET next_leaf = excluded.next_leaf, sending_to = excluded.sending_to,
    delivered = excluded.delivered, sent_unconfirmed = excluded.sent_unconfirmed,
    redelivered = excluded.redelivered, updated_at = excluded.updated_at
WHERE export_cursors.next_leaf = $8;
