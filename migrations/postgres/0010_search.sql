-- 0010: the compliance search's projection and the indexes the UI's pages
-- read. Run as the owner role.
--
-- search_entries is derived, not evidence: one row per entry holding the
-- members a compliance search filters on, read out of the entry's
-- canonical content (and the tool name out of the request's params) by
-- triggers in the appending transaction, so no writer has to know about
-- it. It commits to nothing: the chain, the responses and the log stay the
-- evidence, and a search result links to its bundle for proof.
--
-- source is where the record came from: an ingested entry's top-level
-- "source_format" (opa, bash-guard, a2h; ingest/, migration 0007) or
-- "source" member, else 'guardian' (this ledger's Guardian writes
-- neither); flags is its top-level "flags" array of strings
-- (fail_open, unlock_bypass, ...). policy_refs holds,
-- for each decision.policy_references element, its policy_id and
-- "policy_id@policy_version", so that one GIN lookup finds either.
-- Erasing a step's params (0005) leaves its tool_name: the name of the tool
-- is what a compliance search asks for, the arguments are what erasure
-- takes away, and they are never copied here.
CREATE TABLE search_entries (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id    text NOT NULL,
    position      bigint NOT NULL,
    agent_id      text NOT NULL,
    recorded_at   timestamptz NOT NULL,
    step_id       text NOT NULL,
    step_type     text NOT NULL,
    disposition   text NOT NULL DEFAULT '',
    reason_codes  text[] NOT NULL DEFAULT '{}',
    policy_refs   text[] NOT NULL DEFAULT '{}',
    tool_name     text NOT NULL DEFAULT '',
    source        text NOT NULL DEFAULT 'guardian',
    flags         text[] NOT NULL DEFAULT '{}',
    reasoning     text NOT NULL DEFAULT '',
    UNIQUE (session_id, position)
);
CREATE INDEX search_entries_agent ON search_entries (agent_id, id);
CREATE INDEX search_entries_recorded ON search_entries (recorded_at, id);
CREATE INDEX search_entries_disposition ON search_entries (disposition, id);
CREATE INDEX search_entries_tool ON search_entries (tool_name, id) WHERE tool_name <> '';
CREATE INDEX search_entries_source ON search_entries (source, id);
CREATE INDEX search_entries_reason_codes ON search_entries USING gin (reason_codes);
CREATE INDEX search_entries_policy_refs ON search_entries USING gin (policy_refs);
CREATE INDEX search_entries_flags ON search_entries USING gin (flags);

-- Text in the reasoning is found with ILIKE, which a trigram index serves
-- (a search for a phrase found once in a million rows reads the index,
-- not the table). pg_trgm ships with PostgreSQL's contrib and is a trusted
-- extension: the database's owner may create it. Where it is missing the
-- search still works, by reading the table.
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        CREATE EXTENSION IF NOT EXISTS pg_trgm;
        EXECUTE 'CREATE INDEX search_entries_reasoning ON search_entries USING gin (reasoning gin_trgm_ops)';
    ELSE
        RAISE NOTICE 'acsledger: pg_trgm is not available: reasoning text searches read the whole projection';
    END IF;
END
$$;

-- acsledger_json_strings is a JSON array's string elements; anything else
-- gives none.
CREATE FUNCTION acsledger_json_strings(v jsonb) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(array_agg(x), '{}') FROM (
        SELECT e #>> '{}' AS x FROM jsonb_array_elements(
            CASE WHEN jsonb_typeof(v) = 'array' THEN v ELSE '[]'::jsonb END) AS e
        WHERE jsonb_typeof(e) = 'string') s
$$;

-- acsledger_policy_refs is what a search by policy matches: for each
-- reference with a policy_id, the id alone (any version) and
-- "id@version".
CREATE FUNCTION acsledger_policy_refs(refs jsonb) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(array_agg(DISTINCT x ORDER BY x), '{}') FROM (
        SELECT r ->> 'policy_id' AS id, coalesce(r ->> 'policy_version', '') AS version
        FROM jsonb_array_elements(CASE WHEN jsonb_typeof(refs) = 'array' THEN refs ELSE '[]'::jsonb END) AS r
        WHERE jsonb_typeof(r -> 'policy_id') = 'string') p,
    LATERAL (VALUES (p.id), (p.id || '@' || p.version)) AS v (x)
$$;

-- acsledger_search_project is one entry's projected members, from its
-- canonical content as jsonb; the triggers and the backfill share it. A
-- decision may be the disposition alone (a string) or an object.
CREATE FUNCTION acsledger_search_project(c jsonb)
RETURNS TABLE (disposition text, reason_codes text[], policy_refs text[], source text, flags text[], reasoning text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(CASE WHEN jsonb_typeof(d) = 'string' THEN d #>> '{}'
                         ELSE coalesce(d ->> 'disposition', d ->> 'decision') END, ''),
           acsledger_json_strings(d -> 'reason_codes'),
           acsledger_policy_refs(d -> 'policy_references'),
           CASE WHEN jsonb_typeof(c -> 'source_format') = 'string' THEN c ->> 'source_format'
                WHEN jsonb_typeof(c -> 'source') = 'string' THEN c ->> 'source'
                ELSE 'guardian' END,
           acsledger_json_strings(c -> 'flags'),
           coalesce(CASE WHEN jsonb_typeof(d -> 'reasoning') = 'string' THEN d ->> 'reasoning' END, '')
    FROM (SELECT c -> 'decision' AS d) x
$$;

-- The triggers are per statement, over the statement's new rows, so a
-- bulk append (ingest, COPY) projects its rows in one INSERT.
CREATE FUNCTION acsledger_search_entries() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_entries (session_id, position, agent_id, recorded_at, step_id, step_type,
        disposition, reason_codes, policy_refs, source, flags, reasoning)
    SELECT e.session_id, e.position, s.agent_id, e.recorded_at, e.step_id, e.step_type, p.*
    FROM new_entries e
    JOIN sessions s ON s.session_id = e.session_id
    CROSS JOIN LATERAL acsledger_search_project(convert_from(e.content, 'UTF8')::jsonb) p
    ORDER BY e.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER entries_search AFTER INSERT ON entries
    REFERENCING NEW TABLE AS new_entries
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_search_entries();

-- Params are sealed at rest (ledger/paramcrypt), so the database cannot
-- read a tool name out of them: the store writes it in clear beside them
-- (ledger.ToolName, payload.tool.name), and the search copies it.
ALTER TABLE request_params ADD COLUMN tool_name text;

-- acsledger_params_tool is the tool name of params stored in clear before
-- sealing (payload.tool.name), or NULL, also for params it cannot read:
-- the backfill below only.
CREATE FUNCTION acsledger_params_tool(params bytea) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    RETURN convert_from(params, 'UTF8')::jsonb #>> '{payload,tool,name}';
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;

-- The tool name arrives with the params, after the entry, in the same
-- transaction.
CREATE FUNCTION acsledger_search_params() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE search_entries se SET tool_name = t.tool_name
    FROM new_params t
    WHERE t.session_id = se.session_id AND t.position = se.position AND t.tool_name IS NOT NULL;
    RETURN NULL;
END
$$;
CREATE TRIGGER request_params_search AFTER INSERT ON request_params
    REFERENCING NEW TABLE AS new_params
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_search_params();

-- What the ledger held before this migration.
INSERT INTO search_entries (session_id, position, agent_id, recorded_at, step_id, step_type,
    disposition, reason_codes, policy_refs, source, flags, reasoning)
SELECT e.session_id, e.position, s.agent_id, e.recorded_at, e.step_id, e.step_type, p.*
FROM entries e
JOIN sessions s ON s.session_id = e.session_id
CROSS JOIN LATERAL acsledger_search_project(convert_from(e.content, 'UTF8')::jsonb) p
ORDER BY e.id;
UPDATE search_entries se SET tool_name = t.tool
FROM (SELECT session_id, position, acsledger_params_tool(params) AS tool FROM request_params) t
WHERE t.session_id = se.session_id AND t.position = se.position AND t.tool IS NOT NULL;

REVOKE ALL ON search_entries FROM PUBLIC;
-- The writer's appends fire the triggers, which run as the writer.
GRANT SELECT, INSERT, UPDATE ON search_entries TO acsledger_writer;
GRANT EXECUTE ON FUNCTION acsledger_json_strings(jsonb), acsledger_policy_refs(jsonb),
    acsledger_search_project(jsonb), acsledger_params_tool(bytea) TO acsledger_writer;
