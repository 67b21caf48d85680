-- Retention rules, legal holds and erasure runs (migration 0016;
-- ledger.RetentionAdmin, ledger.PayloadSweeper).

-- name: PutRule
INSERT INTO retention_rules (name, agent_prefix, source_format, step_type, period_seconds, reason, set_by, set_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (name) DO UPDATE SET agent_prefix = excluded.agent_prefix, source_format = excluded.source_format,
    step_type = excluded.step_type, period_seconds = excluded.period_seconds, reason = excluded.reason,
    set_by = excluded.set_by, set_at = excluded.set_at;

-- name: DeleteRule
DELETE FROM retention_rules WHERE name = $1
RETURNING name, agent_prefix, source_format, step_type, period_seconds, reason, set_by, set_at;

-- name: Rules
SELECT name, agent_prefix, source_format, step_type, period_seconds, reason, set_by, set_at
FROM retention_rules ORDER BY name;

-- name: InsertHold
INSERT INTO legal_holds (case_name, agent_prefix, from_time, until_time, session_count, reason, set_by, set_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING id;

-- name: InsertHoldSession
INSERT INTO legal_hold_sessions (hold_id, session_id) VALUES ($1, $2) ON CONFLICT DO NOTHING;

-- name: ReleaseHold
UPDATE legal_holds SET released_at = $2, released_by = $3, release_reason = $4
WHERE case_name = $1 AND released_at IS NULL
RETURNING id;

-- name: Holds
SELECT id, case_name, agent_prefix, from_time, until_time, reason, set_by, set_at,
    released_at, coalesce(released_by, ''), coalesce(release_reason, '')
FROM legal_holds
WHERE $1::integer = 1 OR released_at IS NULL
ORDER BY id;

-- name: HoldByID
SELECT id, case_name, agent_prefix, from_time, until_time, reason, set_by, set_at,
    released_at, coalesce(released_by, ''), coalesce(release_reason, '')
FROM legal_holds WHERE id = $1;

-- name: HoldSessions
SELECT session_id FROM legal_hold_sessions WHERE hold_id = $1 ORDER BY session_id;

-- name: HeldBy
-- The standing hold, if any, covering a session's entry at a position.
-- The hold predicate is the same as in EraseParamsBatch.
SELECT h.case_name
FROM sessions s
JOIN entries e ON e.session_id = s.session_id
JOIN legal_holds h ON h.released_at IS NULL
WHERE s.session_id = $1 AND e.position = $2
  AND (h.agent_prefix = '' OR substr(s.agent_id, 1, length(h.agent_prefix)) = h.agent_prefix)
  AND (h.from_time IS NULL OR e.recorded_at >= h.from_time)
  AND (h.until_time IS NULL OR e.recorded_at < h.until_time)
  AND (h.session_count = 0 OR EXISTS (
        SELECT 1 FROM legal_hold_sessions hs WHERE hs.hold_id = h.id AND hs.session_id = s.session_id))
ORDER BY h.id
LIMIT 1;

-- name: ParamsKeys
-- The next page of stored params in key order: a batch's bounds.
SELECT session_id, position FROM request_params
WHERE (session_id, position) > ($1::text, $2::bigint)
ORDER BY session_id, position
LIMIT $3;

-- name: DeleteErasedParams
-- Deletes one params row the run recorded as erased (EraseParamsBatch,
-- same transaction); the trigger request_params_erased_only checks it
-- against erasures.
DELETE FROM request_params WHERE session_id = $1 AND position = $2;

-- name: SourceKeys
-- The next page of stored source records in key order (ParamsKeys for
-- the source kind).
SELECT session_id, position FROM source_records
WHERE (session_id, position) > ($1::text, $2::bigint)
ORDER BY session_id, position
LIMIT $3;

-- name: DeleteErasedSource
-- Deletes one source record the run recorded as erased (EraseSourceBatch,
-- same transaction); the trigger source_records_erased_only checks it
-- against source_erasures.
DELETE FROM source_records WHERE session_id = $1 AND position = $2;

-- name: StartRun
INSERT INTO retention_runs (run_id, kind, scope, started_at) VALUES ($1, $2, $3, $4);

-- name: FinishRun
UPDATE retention_runs SET finished_at = $2, erased = $3 WHERE run_id = $1 AND finished_at IS NULL;

-- name: UnfinishedRuns
SELECT run_id, kind, scope, started_at FROM retention_runs WHERE finished_at IS NULL ORDER BY started_at;

-- name: RunErasures
-- What a run erased per session, params and source records together.
SELECT session_id, count(*), min(position), max(position)
FROM (SELECT session_id, position FROM erasures WHERE run_id = $1
      UNION ALL
      SELECT session_id, position FROM source_erasures WHERE run_id = $1) x
GROUP BY session_id ORDER BY session_id;

-- name: RetentionTotals
-- The dashboard's counts: payloads erased by sweeps and by requests, and
-- the last finished sweep.
SELECT
    (SELECT coalesce(sum(erased), 0) FROM retention_runs WHERE kind = 'sweep'),
    (SELECT coalesce(sum(erased), 0) FROM retention_runs WHERE kind = 'request'),
    (SELECT max(finished_at) FROM retention_runs WHERE kind = 'sweep'),
    (SELECT count(*) FROM legal_holds WHERE released_at IS NULL);

-- name: OldestPayload
-- When the oldest stored params in a rule's scope was recorded: it expires
-- first. Walks the entries in id order (the order they were recorded).
SELECT e.recorded_at
FROM request_params p
JOIN entries e ON e.session_id = p.session_id AND e.position = p.position
JOIN sessions s ON s.session_id = p.session_id
WHERE ($1::text = '' OR substr(s.agent_id, 1, length($1::text)) = $1::text)
  AND ($2::text = '' OR e.step_type = $2::text)
ORDER BY e.recorded_at
LIMIT 1;
