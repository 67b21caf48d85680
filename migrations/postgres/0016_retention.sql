-- 0016: retention rules, legal holds and erasure runs (docs/retention.md).
-- Run as the owner role.
--
--   - retention_rules: an admin's rules, each a scope (agent prefix, source
--     format, step type, '' for any) and a period of at least one day.
--     Configuration, not evidence: a rule may be replaced or deleted; every
--     change is recorded as a chained entry in the admin session.
--   - legal_holds (+ legal_hold_sessions): a case, a scope (listed sessions,
--     an agent prefix, a time range of recorded_at), who set it and why.
--     Never deleted; a hold is released once, by setting the release
--     columns, and nothing else of a row may change.
--   - retention_runs: one row per sweep of a rule or erasure request, so a
--     run cut short (kill -9) is found and its record written afterwards.
--   - erasures.run_id names the run that erased a payload (NULL for an
--     erasure of one step by hand).
ALTER TABLE erasures ADD COLUMN run_id text;
CREATE INDEX erasures_run_id ON erasures (run_id) WHERE run_id IS NOT NULL;

CREATE TABLE retention_rules (
    name           text PRIMARY KEY CHECK (btrim(name) <> ''),
    agent_prefix   text NOT NULL DEFAULT '',
    source_format  text NOT NULL DEFAULT '',
    step_type      text NOT NULL DEFAULT '',
    period_seconds bigint NOT NULL CHECK (period_seconds >= 86400),
    reason         text NOT NULL CHECK (btrim(reason) <> ''),
    set_by         text NOT NULL,
    set_at         timestamptz NOT NULL
);

CREATE TABLE legal_holds (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    case_name      text NOT NULL CHECK (btrim(case_name) <> ''),
    agent_prefix   text NOT NULL DEFAULT '',
    from_time      timestamptz,
    until_time     timestamptz,
    session_count  integer NOT NULL DEFAULT 0,
    reason         text NOT NULL CHECK (btrim(reason) <> ''),
    set_by         text NOT NULL,
    set_at         timestamptz NOT NULL,
    released_at    timestamptz,
    released_by    text,
    release_reason text,
    CHECK (from_time IS NULL OR until_time IS NULL OR until_time > from_time)
);
-- One standing hold per case; a released case may be held again.
CREATE UNIQUE INDEX legal_holds_standing ON legal_holds (case_name) WHERE released_at IS NULL;

CREATE TABLE legal_hold_sessions (
    hold_id    bigint NOT NULL REFERENCES legal_holds (id),
    session_id text NOT NULL,
    PRIMARY KEY (hold_id, session_id)
);

CREATE FUNCTION acsledger_hold_release_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.released_at IS NOT NULL OR NEW.released_at IS NULL
       OR (NEW.id, NEW.case_name, NEW.agent_prefix, NEW.session_count, NEW.reason, NEW.set_by, NEW.set_at) IS DISTINCT FROM
          (OLD.id, OLD.case_name, OLD.agent_prefix, OLD.session_count, OLD.reason, OLD.set_by, OLD.set_at)
       OR NEW.from_time IS DISTINCT FROM OLD.from_time OR NEW.until_time IS DISTINCT FROM OLD.until_time THEN
        RAISE EXCEPTION 'acsledger: UPDATE on legal_holds refused for case %: a hold can only be released, once', OLD.case_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER legal_holds_release_only BEFORE UPDATE ON legal_holds
    FOR EACH ROW EXECUTE FUNCTION acsledger_hold_release_only();
CREATE TRIGGER legal_holds_no_delete BEFORE DELETE OR TRUNCATE ON legal_holds
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();
CREATE TRIGGER legal_hold_sessions_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON legal_hold_sessions
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();

CREATE TABLE retention_runs (
    run_id      text PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('sweep', 'request')),
    scope       text NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    erased      bigint
);
CREATE INDEX retention_runs_unfinished ON retention_runs (started_at) WHERE finished_at IS NULL;

CREATE FUNCTION acsledger_run_finish_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.finished_at IS NOT NULL OR NEW.finished_at IS NULL
       OR (NEW.run_id, NEW.kind, NEW.scope, NEW.started_at) IS DISTINCT FROM
          (OLD.run_id, OLD.kind, OLD.scope, OLD.started_at) THEN
        RAISE EXCEPTION 'acsledger: UPDATE on retention_runs refused for %: a run can only be finished, once', OLD.run_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER retention_runs_finish_only BEFORE UPDATE ON retention_runs
    FOR EACH ROW EXECUTE FUNCTION acsledger_run_finish_only();
CREATE TRIGGER retention_runs_no_delete BEFORE DELETE OR TRUNCATE ON retention_runs
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();

REVOKE ALL ON retention_rules, legal_holds, legal_hold_sessions, retention_runs FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON retention_rules TO acsledger_writer;
GRANT SELECT, INSERT ON legal_holds, legal_hold_sessions, retention_runs TO acsledger_writer;
GRANT UPDATE (released_at, released_by, release_reason) ON legal_holds TO acsledger_writer;
GRANT UPDATE (finished_at, erased) ON retention_runs TO acsledger_writer;
-- The eraser's batch reads the entries' age and agent and the standing
-- holds in the statement that records its erasures.
GRANT SELECT ON sessions, entries, legal_holds, legal_hold_sessions TO acsledger_eraser;
