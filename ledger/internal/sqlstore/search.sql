-- Named queries of the compliance search (ledger/search.go) over
-- search_entries (migration 0010). FILTERS is replaced by the filter's
-- conditions, each " AND <condition>" with its own parameter, written by
-- searchWhere from a fixed set: no value is ever spliced into the text.
-- The list filters are the dialect's (GIN indexes on PostgreSQL's text[],
-- json_each on SQLite's JSON arrays).

-- name: SearchEntries
-- Newest first: the (column, id) indexes serve one equality filter and
-- the order together, and the GIN indexes the list filters.
SELECT id, session_id, position, agent_id, recorded_at, step_id, step_type, disposition,
       reason_codes, policy_refs, tool_name, source, flags, reasoning
FROM search_entries
WHERE true FILTERS
ORDER BY id DESC
LIMIT $1;

-- name: SearchSessions
-- Sessions in id order, grouped along the (session_id, position) unique
-- index, so a page stops reading once it has its sessions.
SELECT session_id, min(agent_id), count(*), min(recorded_at), max(recorded_at)
FROM search_entries
WHERE true FILTERS
GROUP BY session_id
ORDER BY session_id
LIMIT $1;
