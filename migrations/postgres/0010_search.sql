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
-- source is the entry's top-level "source" member when it has one (records
-- ingested from elsewhere carry it), else 'guardian'; flags is its
-- top-level "flags" array of strings when it has one. policy_refs holds,
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

-- acsledger_search_entry projects one entry: its content is the canonical
-- UTF-8 JSON the ledger stored.
CREATE FUNCTION acsledger_search_entry() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    c jsonb := convert_from(NEW.content, 'UTF8')::jsonb;
    d jsonb := c -> 'decision';
BEGIN
    IF jsonb_typeof(d) = 'string' THEN
        d := jsonb_build_object('disposition', d);
    ELSIF jsonb_typeof(d) IS DISTINCT FROM 'object' THEN
        d := '{}'::jsonb;
    END IF;
    INSERT INTO search_entries (session_id, position, agent_id, recorded_at, step_id, step_type,
        disposition, reason_codes, policy_refs, source, flags, reasoning)
    SELECT NEW.session_id, NEW.position, s.agent_id, NEW.recorded_at, NEW.step_id, NEW.step_type,
        coalesce(d ->> 'disposition', d ->> 'decision', ''),
        acsledger_json_strings(d -> 'reason_codes'),
        acsledger_policy_refs(d -> 'policy_references'),
        CASE WHEN jsonb_typeof(c -> 'source') = 'string' THEN c ->> 'source' ELSE 'guardian' END,
        acsledger_json_strings(c -> 'flags'),
        coalesce(d ->> 'reasoning', '')
    FROM sessions s WHERE s.session_id = NEW.session_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER entries_search AFTER INSERT ON entries
    FOR EACH ROW EXECUTE FUNCTION acsledger_search_entry();

-- The tool name arrives with the params, after the entry, in the same
-- transaction.
CREATE FUNCTION acsledger_search_params() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    tool text;
BEGIN
    BEGIN
        tool := convert_from(NEW.params, 'UTF8')::jsonb #>> '{payload,tool,name}';
    EXCEPTION WHEN others THEN
        tool := NULL;
    END;
    IF tool IS NOT NULL THEN
        UPDATE search_entries SET tool_name = tool
        WHERE session_id = NEW.session_id AND position = NEW.position;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER request_params_search AFTER INSERT ON request_params
    FOR EACH ROW EXECUTE FUNCTION acsledger_search_params();

-- What the ledger held before this migration.
INSERT INTO search_entries (session_id, position, agent_id, recorded_at, step_id, step_type,
    disposition, reason_codes, policy_refs, source, flags, reasoning)
SELECT e.session_id, e.position, s.agent_id, e.recorded_at, e.step_id, e.step_type,
    coalesce(CASE WHEN jsonb_typeof(c -> 'decision') = 'string' THEN c ->> 'decision'
                  ELSE coalesce(c #>> '{decision,disposition}', c #>> '{decision,decision}') END, ''),
    acsledger_json_strings(c #> '{decision,reason_codes}'),
    acsledger_policy_refs(c #> '{decision,policy_references}'),
    CASE WHEN jsonb_typeof(c -> 'source') = 'string' THEN c ->> 'source' ELSE 'guardian' END,
    acsledger_json_strings(c -> 'flags'),
    coalesce(c #>> '{decision,reasoning}', '')
FROM entries e
JOIN sessions s ON s.session_id = e.session_id
CROSS JOIN LATERAL (SELECT convert_from(e.content, 'UTF8')::jsonb AS c) j
ORDER BY e.id;
UPDATE search_entries se SET tool_name = p.tool
FROM (SELECT session_id, position, convert_from(params, 'UTF8')::jsonb #>> '{payload,tool,name}' AS tool
      FROM request_params) p
WHERE p.session_id = se.session_id AND p.position = se.position AND p.tool IS NOT NULL;

REVOKE ALL ON search_entries FROM PUBLIC;
-- The writer's appends fire the triggers, which run as the writer.
GRANT SELECT, INSERT, UPDATE ON search_entries TO acsledger_writer;
GRANT EXECUTE ON FUNCTION acsledger_json_strings(jsonb), acsledger_policy_refs(jsonb) TO acsledger_writer;
