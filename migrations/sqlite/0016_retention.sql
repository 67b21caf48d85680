-- 0016: retention rules, legal holds and erasure runs. Mirrors
-- postgres/0016_retention.sql; SQLite has no roles, so triggers alone keep
-- holds to their one release and runs to their one finish. Times are Unix
-- microseconds.
ALTER TABLE erasures ADD COLUMN run_id TEXT;
CREATE INDEX erasures_run_id ON erasures (run_id) WHERE run_id IS NOT NULL;

CREATE TABLE retention_rules (
    name           TEXT PRIMARY KEY CHECK (trim(name) <> ''),
    agent_prefix   TEXT NOT NULL DEFAULT '',
    source_format  TEXT NOT NULL DEFAULT '',
    step_type      TEXT NOT NULL DEFAULT '',
    period_seconds INTEGER NOT NULL CHECK (period_seconds >= 86400),
    reason         TEXT NOT NULL CHECK (trim(reason) <> ''),
    set_by         TEXT NOT NULL,
    set_at         INTEGER NOT NULL
);

CREATE TABLE legal_holds (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    case_name      TEXT NOT NULL CHECK (trim(case_name) <> ''),
    agent_prefix   TEXT NOT NULL DEFAULT '',
    from_time      INTEGER,
    until_time     INTEGER,
    session_count  INTEGER NOT NULL DEFAULT 0,
    reason         TEXT NOT NULL CHECK (trim(reason) <> ''),
    set_by         TEXT NOT NULL,
    set_at         INTEGER NOT NULL,
    released_at    INTEGER,
    released_by    TEXT,
    release_reason TEXT,
    CHECK (from_time IS NULL OR until_time IS NULL OR until_time > from_time)
);
CREATE UNIQUE INDEX legal_holds_standing ON legal_holds (case_name) WHERE released_at IS NULL;

CREATE TABLE legal_hold_sessions (
    hold_id    INTEGER NOT NULL REFERENCES legal_holds (id),
    session_id TEXT NOT NULL,
    PRIMARY KEY (hold_id, session_id)
);

CREATE TRIGGER legal_holds_release_only BEFORE UPDATE ON legal_holds
WHEN OLD.released_at IS NOT NULL OR NEW.released_at IS NULL
  OR NEW.id IS NOT OLD.id OR NEW.case_name IS NOT OLD.case_name OR NEW.agent_prefix IS NOT OLD.agent_prefix
  OR NEW.from_time IS NOT OLD.from_time OR NEW.until_time IS NOT OLD.until_time
  OR NEW.session_count IS NOT OLD.session_count OR NEW.reason IS NOT OLD.reason
  OR NEW.set_by IS NOT OLD.set_by OR NEW.set_at IS NOT OLD.set_at
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on legal_holds refused: a hold can only be released, once'); END;
CREATE TRIGGER legal_holds_no_delete BEFORE DELETE ON legal_holds
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on legal_holds refused: holds are released, never deleted'); END;
CREATE TRIGGER legal_hold_sessions_no_update BEFORE UPDATE ON legal_hold_sessions
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on legal_hold_sessions refused: the table is append-only'); END;
CREATE TRIGGER legal_hold_sessions_no_delete BEFORE DELETE ON legal_hold_sessions
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on legal_hold_sessions refused: the table is append-only'); END;

CREATE TABLE retention_runs (
    run_id      TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('sweep', 'request')),
    scope       TEXT NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    erased      INTEGER
);
CREATE INDEX retention_runs_unfinished ON retention_runs (started_at) WHERE finished_at IS NULL;

CREATE TRIGGER retention_runs_finish_only BEFORE UPDATE ON retention_runs
WHEN OLD.finished_at IS NOT NULL OR NEW.finished_at IS NULL
  OR NEW.run_id IS NOT OLD.run_id OR NEW.kind IS NOT OLD.kind OR NEW.scope IS NOT OLD.scope
  OR NEW.started_at IS NOT OLD.started_at
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on retention_runs refused: a run can only be finished, once'); END;
CREATE TRIGGER retention_runs_no_delete BEFORE DELETE ON retention_runs
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on retention_runs refused: runs are finished, never deleted'); END;
