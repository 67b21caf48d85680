-- Named queries of the dashboard's and the log page's charts. Times are
-- Unix microseconds; a day is 86400000000 of them.

-- name: DailyDecisions
SELECT recorded_at / 86400000000 AS day, disposition, count(*)
FROM search_entries
WHERE recorded_at >= ?1 AND agent_id <> ?2
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: DailySessions
SELECT created_at / 86400000000 AS day, count(*)
FROM sessions
WHERE created_at >= ?1 AND agent_id <> ?2
GROUP BY 1
ORDER BY 1;

-- name: TreeSizes
SELECT size, created_at FROM (
    SELECT size, created_at FROM tlog_checkpoints ORDER BY size DESC LIMIT ?1
) t ORDER BY size;

-- name: HasQuarantine
SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'ingest_quarantine';

-- name: Quarantined
SELECT count(*) FROM ingest_quarantine;
