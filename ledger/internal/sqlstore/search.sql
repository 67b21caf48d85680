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

-- name: RecordedSteps
-- A what-if run's page of steps (ledger/steps.go), in recorded order
-- after a sequence number: the projection's primary key serves the order
-- and the keyset, its indexes the filters, and each step's entry, params,
-- response and erasure are found by (session_id, position).
SELECT x.id, x.agent_id, x.tool_name, x.source, x.disposition,
       e.session_id, e.position, e.entry_id, e.step_id, e.step_type, e.entry_timestamp, e.recorded_at,
       e.content, e.entry_hash, e.previous_hash,
       p.session_id IS NOT NULL, p.params, r.response, er.session_id IS NOT NULL
FROM (SELECT id, session_id, position, agent_id, tool_name, source, disposition
      FROM search_entries
      WHERE true FILTERS
      ORDER BY id
      LIMIT $1) x
JOIN entries e ON e.session_id = x.session_id AND e.position = x.position
LEFT JOIN request_params p ON p.session_id = x.session_id AND p.position = x.position
LEFT JOIN responses r ON r.session_id = x.session_id AND r.position = x.position
LEFT JOIN erasures er ON er.session_id = x.session_id AND er.position = x.position
ORDER BY x.id;
