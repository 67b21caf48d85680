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
-- It also parses each entry's content once. acsledger_search_project is
-- inlined into the trigger's query, and with it its argument: given
-- convert_from(content)::jsonb, the plan parsed the content again for each
-- of the thirteen places the function reads it. The LATERAL subquery with
-- OFFSET 0 (which the planner does not flatten) parses it once per row and
-- the function reads that value; its output is the same.

CREATE OR REPLACE FUNCTION acsledger_search_entries() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_entries (session_id, position, agent_id, recorded_at, step_id, step_type,
        disposition, reason_codes, policy_refs, source, flags, reasoning, tool_name)
    SELECT e.session_id, e.position, s.agent_id, e.recorded_at, e.step_id, e.step_type, p.*,
        coalesce(rp.tool_name, '')
    FROM new_entries e
    JOIN sessions s ON s.session_id = e.session_id
    LEFT JOIN request_params rp ON rp.session_id = e.session_id AND rp.position = e.position
    CROSS JOIN LATERAL (SELECT convert_from(e.content, 'UTF8')::jsonb AS c OFFSET 0) j
    CROSS JOIN LATERAL acsledger_search_project(j.c) p
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
