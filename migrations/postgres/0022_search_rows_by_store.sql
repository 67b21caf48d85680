-- 0022: the store may write the search rows of the entries it COPYs
-- itself, and the projection trigger then stands aside. Run as the owner
-- role.
--
-- On the bulk paths (ingest, large AppendBatch groups) the entries go in
-- by COPY, and the projection trigger (0010, 0012) then cast each entry's
-- content to jsonb and read its members in one INSERT ... SELECT over the
-- transition table: in the bulk ingest benchmark about 48 us of
-- PostgreSQL CPU per entry where COPYing the same search rows costs 28
-- (docs/benchmarks.md, issue 25, lever 3). The store has each entry's
-- canonical content in hand and reads the same members out of it
-- (ledger/pgstore/searchrow.go); it COPYs the rows right after the
-- entries, in the same transaction, having set acsledger.search_by_store
-- to 'on' for the entries' statement (set_config, local to the
-- transaction), and sets it back to 'off' after. Any group holding an
-- entry whose reading could differ from the trigger's (searchrow.go,
-- projectSearch) is left to the trigger, and so are the Guardian's group
-- commits (one INSERT for everything, below copyMin).
--
-- This gives the writer role nothing it did not have: it holds INSERT and
-- UPDATE on search_entries (0010), which is derived, not evidence, and
-- commits to nothing. pgstore's TestSearchProjection holds every row
-- either way writes to acsledger_search_project, the definition.

CREATE OR REPLACE FUNCTION acsledger_search_entries() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('acsledger.search_by_store', true) = 'on' THEN
        RETURN NULL;
    END IF;
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
