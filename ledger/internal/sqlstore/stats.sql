-- Named queries of the dashboard's and the log page's charts; the daily
-- counts are in each dialect's file.

-- name: TreeSizes
-- The newest $1 checkpoints, oldest first.
SELECT size, created_at FROM (
    SELECT size, created_at FROM tlog_checkpoints ORDER BY size DESC LIMIT $1
) t ORDER BY size;

-- name: CountQuarantined
SELECT count(*) FROM ingest_quarantine;
