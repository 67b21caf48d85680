-- 0013: the search projection's trigger at the cost of one JSON parse per
-- entry (issue 12's ingest speed). Run as the owner role.
--
-- Measured on 50,000 OPA decisions (docs/benchmarks.md, "Ingest speed"):
-- the projection of 0010 cost ~90 us of PostgreSQL CPU per entry, most of
-- an ingest's. Two things made it dear, neither needed:
--
--   - acsledger_search_project is a SQL function over a table, which the
--     planner inlines into the trigger's INSERT, putting the argument's
--     expression, convert_from(content)::jsonb, in place of each of its
--     six uses of c: the entry's content was parsed six times. The trigger
--     now parses it once, in a LATERAL subquery that the planner keeps
--     (OFFSET 0), and hands the projection the parsed value;
--   - acsledger_json_strings and acsledger_policy_refs hold an aggregate,
--     so they are not inlined: each call runs a SQL function of its own,
--     three per entry, even for a member that is absent or an empty array
--     (most entries: no reason codes, no flags, no policy references).
--     The projection calls them only for a non-empty array; what they
--     give is unchanged ('{}' otherwise, as before).
--
-- The projected rows are the same as 0010's, member for member.

CREATE OR REPLACE FUNCTION acsledger_search_project(c jsonb)
RETURNS TABLE (disposition text, reason_codes text[], policy_refs text[], source text, flags text[], reasoning text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(CASE WHEN jsonb_typeof(d) = 'string' THEN d #>> '{}'
                         ELSE coalesce(d ->> 'disposition', d ->> 'decision') END, ''),
           CASE WHEN jsonb_typeof(d -> 'reason_codes') = 'array' AND d -> 'reason_codes' <> '[]'::jsonb
                THEN acsledger_json_strings(d -> 'reason_codes') ELSE '{}' END,
           CASE WHEN jsonb_typeof(d -> 'policy_references') = 'array' AND d -> 'policy_references' <> '[]'::jsonb
                THEN acsledger_policy_refs(d -> 'policy_references') ELSE '{}' END,
           CASE WHEN jsonb_typeof(c -> 'source_format') = 'string' THEN c ->> 'source_format'
                WHEN jsonb_typeof(c -> 'source') = 'string' THEN c ->> 'source'
                ELSE 'guardian' END,
           CASE WHEN jsonb_typeof(c -> 'flags') = 'array' AND c -> 'flags' <> '[]'::jsonb
                THEN acsledger_json_strings(c -> 'flags') ELSE '{}' END,
           coalesce(CASE WHEN jsonb_typeof(d -> 'reasoning') = 'string' THEN d ->> 'reasoning' END, '')
    FROM (SELECT c -> 'decision' AS d) x
$$;

CREATE OR REPLACE FUNCTION acsledger_search_entries() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_entries (session_id, position, agent_id, recorded_at, step_id, step_type,
        disposition, reason_codes, policy_refs, source, flags, reasoning)
    SELECT e.session_id, e.position, s.agent_id, e.recorded_at, e.step_id, e.step_type, p.*
    FROM new_entries e
    JOIN sessions s ON s.session_id = e.session_id
    CROSS JOIN LATERAL (SELECT convert_from(e.content, 'UTF8')::jsonb AS c OFFSET 0) j
    CROSS JOIN LATERAL acsledger_search_project(j.c) p
    ORDER BY e.id;
    RETURN NULL;
END
$$;

-- The GIN indexes of the list members and of the reasoning text hold only
-- the rows that have something to find: a GIN index otherwise keeps an
-- entry for each empty array or text, which every ingested OPA decision
-- and most Guardian entries are, and each cost an insert. A search for a
-- value can only match a non-empty array or text, and says so
-- (pgstore/search.go adds "col <> '{}'" and "reasoning <> ''"), which lets
-- the planner use the partial indexes.
DROP INDEX search_entries_reason_codes;
DROP INDEX search_entries_policy_refs;
DROP INDEX search_entries_flags;
CREATE INDEX search_entries_reason_codes ON search_entries USING gin (reason_codes) WHERE reason_codes <> '{}';
CREATE INDEX search_entries_policy_refs ON search_entries USING gin (policy_refs) WHERE policy_refs <> '{}';
CREATE INDEX search_entries_flags ON search_entries USING gin (flags) WHERE flags <> '{}';

DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_indexes WHERE indexname = 'search_entries_reasoning') THEN
        DROP INDEX search_entries_reasoning;
        EXECUTE 'CREATE INDEX search_entries_reasoning ON search_entries USING gin (reasoning gin_trgm_ops) WHERE reasoning <> ''''';
    END IF;
END
$$;
