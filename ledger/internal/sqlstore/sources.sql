-- Payloads kept beside entries (migrations 0003, 0005, 0015): the source
-- records of ingested entries, their erasures, and the payloads of a range
-- of positions for bundles and verification.

-- name: SourceRecord
SELECT record FROM source_records WHERE session_id = $1 AND position = $2;

-- name: InsertSourceErasure
-- Records the erasure only where a source record is stored and no erasure
-- is: no row back means there is nothing to erase, or it was erased
-- already (the caller reads SourceErasure to tell which).
INSERT INTO source_erasures (session_id, position, erased_at, reason, erased_by)
SELECT session_id, position, $3, $4, $5
FROM source_records
WHERE session_id = $1 AND position = $2
ON CONFLICT (session_id, position) DO NOTHING
RETURNING erased_at;

-- name: DeleteSourceRecord
-- Allowed by the trigger source_records_erased_only only after
-- InsertSourceErasure, in the same transaction.
DELETE FROM source_records WHERE session_id = $1 AND position = $2;

-- name: SourceErasure
SELECT erased_at, reason, erased_by FROM source_erasures WHERE session_id = $1 AND position = $2;

-- name: EntryExists
SELECT EXISTS (SELECT 1 FROM entries WHERE session_id = $1 AND position = $2);

-- name: Payloads
-- Kind 0 params, 1 params erased, 2 source, 3 source erased; params bytes
-- only when $4 is 1. Every branch reads its table's primary key range.
SELECT position, 0 AS kind, CASE WHEN $4::bigint = 1 THEN params END AS bytes,
    NULL AS erased_at, '' AS reason, '' AS erased_by
FROM request_params WHERE session_id = $1 AND position >= $2 AND position < $3
UNION ALL
SELECT position, 1, NULL, erased_at, reason, erased_by
FROM erasures WHERE session_id = $1 AND position >= $2 AND position < $3
UNION ALL
SELECT position, 2, record, NULL, '', ''
FROM source_records WHERE session_id = $1 AND position >= $2 AND position < $3
UNION ALL
SELECT position, 3, NULL, erased_at, reason, erased_by
FROM source_erasures WHERE session_id = $1 AND position >= $2 AND position < $3
ORDER BY 1, 2;
