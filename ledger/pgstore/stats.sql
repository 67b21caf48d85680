-- Named queries of the dashboard's and the log page's charts.

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

-- name: TreeSizes
-- The newest $1 checkpoints, oldest first.
SELECT size, created_at FROM (
    SELECT size, created_at FROM tlog_checkpoints ORDER BY size DESC LIMIT $1
) t ORDER BY size;

-- name: HasQuarantine
-- The ingest quarantine (migration 0007) when this database has it.
SELECT to_regclass('ingest_quarantine') IS NOT NULL;

-- name: Quarantined
SELECT count(*) FROM ingest_quarantine;
