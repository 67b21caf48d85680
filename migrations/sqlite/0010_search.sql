-- 0010: the compliance search's projection. Mirrors
-- postgres/0010_search.sql (read its comments): derived rows, filled by
-- triggers in the appending transaction, committing to nothing. Lists
-- (reason_codes, policy_refs, flags) are JSON arrays of strings; times are
-- Unix microseconds.
CREATE TABLE search_entries (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id    TEXT NOT NULL,
    position      INTEGER NOT NULL,
    agent_id      TEXT NOT NULL,
    recorded_at   INTEGER NOT NULL,
    step_id       TEXT NOT NULL,
    step_type     TEXT NOT NULL,
    disposition   TEXT NOT NULL DEFAULT '',
    reason_codes  TEXT NOT NULL DEFAULT '[]',
    policy_refs   TEXT NOT NULL DEFAULT '[]',
    tool_name     TEXT NOT NULL DEFAULT '',
    source        TEXT NOT NULL DEFAULT 'guardian',
    flags         TEXT NOT NULL DEFAULT '[]',
    reasoning     TEXT NOT NULL DEFAULT '',
    UNIQUE (session_id, position)
);
CREATE INDEX search_entries_agent ON search_entries (agent_id, id);
CREATE INDEX search_entries_recorded ON search_entries (recorded_at, id);
CREATE INDEX search_entries_disposition ON search_entries (disposition, id);
CREATE INDEX search_entries_tool ON search_entries (tool_name, id);
CREATE INDEX search_entries_source ON search_entries (source, id);

-- search_projection is one entry's projected members, from its canonical
-- content c (TEXT); the trigger and the backfill share it.
CREATE VIEW search_projection AS
SELECT e.id AS entry_id, e.session_id, e.position, s.agent_id, e.recorded_at, e.step_id, e.step_type,
    coalesce(CASE WHEN json_type(c, '$.decision') = 'text' THEN json_extract(c, '$.decision')
                  ELSE coalesce(json_extract(c, '$.decision.disposition'), json_extract(c, '$.decision.decision')) END, '') AS disposition,
    coalesce((SELECT json_group_array(value) FROM json_each(c, '$.decision.reason_codes')
              WHERE json_type(c, '$.decision.reason_codes') = 'array' AND type = 'text'), '[]') AS reason_codes,
    coalesce((SELECT json_group_array(x) FROM (
                  SELECT json_extract(value, '$.policy_id') AS x FROM json_each(c, '$.decision.policy_references')
                  WHERE json_type(c, '$.decision.policy_references') = 'array' AND json_type(value, '$.policy_id') = 'text'
                  UNION
                  SELECT json_extract(value, '$.policy_id') || '@' || coalesce(json_extract(value, '$.policy_version'), '')
                  FROM json_each(c, '$.decision.policy_references')
                  WHERE json_type(c, '$.decision.policy_references') = 'array' AND json_type(value, '$.policy_id') = 'text')), '[]') AS policy_refs,
    CASE WHEN json_type(c, '$.source_format') = 'text' THEN json_extract(c, '$.source_format')
         WHEN json_type(c, '$.source') = 'text' THEN json_extract(c, '$.source') ELSE 'guardian' END AS source,
    coalesce((SELECT json_group_array(value) FROM json_each(c, '$.flags')
              WHERE json_type(c, '$.flags') = 'array' AND type = 'text'), '[]') AS flags,
    coalesce(CASE WHEN json_type(c, '$.decision.reasoning') = 'text' THEN json_extract(c, '$.decision.reasoning') END, '') AS reasoning
FROM (SELECT *, CAST(content AS TEXT) AS c FROM entries) e
JOIN sessions s ON s.session_id = e.session_id;

CREATE TRIGGER entries_search AFTER INSERT ON entries
BEGIN
    INSERT INTO search_entries (session_id, position, agent_id, recorded_at, step_id, step_type,
        disposition, reason_codes, policy_refs, source, flags, reasoning)
    SELECT session_id, position, agent_id, recorded_at, step_id, step_type,
        disposition, reason_codes, policy_refs, source, flags, reasoning
    FROM search_projection WHERE entry_id = NEW.id;
END;

-- Params are sealed at rest (ledger/paramcrypt), so the database cannot
-- read a tool name out of them: the store writes it in clear beside them
-- (ledger.ToolName, payload.tool.name), and the search copies it. The
-- backfill below still reads params stored in clear before sealing.
ALTER TABLE request_params ADD COLUMN tool_name TEXT;

CREATE TRIGGER request_params_search AFTER INSERT ON request_params
WHEN NEW.tool_name IS NOT NULL
BEGIN
    UPDATE search_entries SET tool_name = NEW.tool_name
    WHERE session_id = NEW.session_id AND position = NEW.position;
END;

INSERT INTO search_entries (session_id, position, agent_id, recorded_at, step_id, step_type,
    disposition, reason_codes, policy_refs, source, flags, reasoning)
SELECT session_id, position, agent_id, recorded_at, step_id, step_type,
    disposition, reason_codes, policy_refs, source, flags, reasoning
FROM search_projection ORDER BY entry_id;
UPDATE search_entries SET tool_name = (
    SELECT json_extract(CAST(p.params AS TEXT), '$.payload.tool.name') FROM request_params p
    WHERE p.session_id = search_entries.session_id AND p.position = search_entries.position)
WHERE EXISTS (SELECT 1 FROM request_params p
    WHERE p.session_id = search_entries.session_id AND p.position = search_entries.position
      AND json_valid(CAST(p.params AS TEXT)) AND json_type(CAST(p.params AS TEXT), '$.payload.tool.name') = 'text');
