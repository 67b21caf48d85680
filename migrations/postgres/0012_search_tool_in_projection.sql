-- 0012: the search projection of an entry takes its tool name from the
-- params stored beside it, when they are written in the entry's statement.
--
-- The store writes a group commit's entries, responses and params in one
-- statement (ledger/pgstore, WriteGroup). Both statement-level triggers of
-- 0010 then fire at its end and see all its rows: the entries' projection
-- reads the tool name from request_params as it inserts, and the params'
-- trigger finds it set and updates nothing. Before, every Guardian step
-- inserted its search row and then updated it to set the tool name: a
-- second row version with an entry in each of the table's indexes (the
-- tool name is indexed, so the update cannot be HOT). Params written by a
-- later statement (COPY's path for large groups) are still set by the
-- update, as before.
--
-- It also projects each entry for a fraction of the CPU, with the same
-- result. acsledger_search_project was inlined into the trigger's query,
-- and its argument with it: given convert_from(content)::jsonb, the plan
-- parsed the content again in each of the thirteen places the function
-- reads it. And acsledger_json_strings and acsledger_policy_refs, SQL
-- functions holding a query, cannot be inlined: each call started an
-- executor of its own, three per row. Here a LATERAL subquery with OFFSET
-- 0 (which the planner does not flatten) parses the content once per row,
-- and the same expressions are written out as subqueries of the trigger's
-- one cached plan. acsledger_search_project stays the definition:
-- ledger/pgstore's TestSearchProjection holds every row this trigger
-- writes to it.

CREATE OR REPLACE FUNCTION acsledger_search_entries() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_entries (session_id, position, agent_id, recorded_at, step_id, step_type,
        disposition, reason_codes, policy_refs, source, flags, reasoning, tool_name)
    SELECT e.session_id, e.position, s.agent_id, e.recorded_at, e.step_id, e.step_type,
        coalesce(CASE WHEN jsonb_typeof(j.d) = 'string' THEN j.d #>> '{}'
                      ELSE coalesce(j.d ->> 'disposition', j.d ->> 'decision') END, ''),
        ARRAY(SELECT x #>> '{}'
              FROM jsonb_array_elements(CASE WHEN jsonb_typeof(j.d -> 'reason_codes') = 'array'
                                             THEN j.d -> 'reason_codes' ELSE '[]'::jsonb END) AS x
              WHERE jsonb_typeof(x) = 'string'),
        ARRAY(SELECT DISTINCT v.x
              FROM jsonb_array_elements(CASE WHEN jsonb_typeof(j.d -> 'policy_references') = 'array'
                                             THEN j.d -> 'policy_references' ELSE '[]'::jsonb END) AS r,
              LATERAL (VALUES (r ->> 'policy_id'),
                              ((r ->> 'policy_id') || '@' || coalesce(r ->> 'policy_version', ''))) AS v (x)
              WHERE jsonb_typeof(r -> 'policy_id') = 'string'
              ORDER BY v.x),
        CASE WHEN jsonb_typeof(j.c -> 'source_format') = 'string' THEN j.c ->> 'source_format'
             WHEN jsonb_typeof(j.c -> 'source') = 'string' THEN j.c ->> 'source'
             ELSE 'guardian' END,
        ARRAY(SELECT x #>> '{}'
              FROM jsonb_array_elements(CASE WHEN jsonb_typeof(j.c -> 'flags') = 'array'
                                             THEN j.c -> 'flags' ELSE '[]'::jsonb END) AS x
              WHERE jsonb_typeof(x) = 'string'),
        coalesce(CASE WHEN jsonb_typeof(j.d -> 'reasoning') = 'string' THEN j.d ->> 'reasoning' END, ''),
        coalesce(rp.tool_name, '')
    FROM new_entries e
    JOIN sessions s ON s.session_id = e.session_id
    LEFT JOIN request_params rp ON rp.session_id = e.session_id AND rp.position = e.position
    CROSS JOIN LATERAL (SELECT c, c -> 'decision' AS d
                        FROM (SELECT convert_from(e.content, 'UTF8')::jsonb AS c OFFSET 0) parsed) j
    ORDER BY e.id;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION acsledger_search_params() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE search_entries se SET tool_name = t.tool_name
    FROM new_params t
    WHERE t.session_id = se.session_id AND t.position = se.position AND t.tool_name IS NOT NULL
      AND se.tool_name <> t.tool_name;
    RETURN NULL;
END
$$;
