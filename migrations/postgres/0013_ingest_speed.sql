-- 0013: the search projection's cost per entry, second part (issue 12's
-- ingest speed). Run as the owner role.
--
-- Measured on 50,000 OPA decisions (docs/benchmarks.md, "Ingest speed"):
-- the projection of 0010 cost ~90 us of PostgreSQL CPU per entry, most of
-- an ingest's. 0012 rewrote the trigger to parse the content once and to
-- call no SQL function per row. What is left here:
--
--   - acsledger_search_project, still the definition of a row's projection
--     (0010's backfill and ledger/pgstore's TestSearchProjection use it),
--     calls its list helpers only for a non-empty array: each call runs a
--     SQL function of its own, and most entries have no reason codes, no
--     flags and no policy references. What it gives is unchanged ('{}'
--     otherwise, as before);
--   - the GIN indexes hold non-empty values only (below).

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
