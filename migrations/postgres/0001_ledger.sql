-- 0001: sessions, chain heads and entries, with append-only enforcement.
--
-- Run as the owner role. The service connects as a member of
-- acsledger_writer and does SET ROLE acsledger_writer on every connection,
-- so the privileges below are what it can do.

-- Roles are cluster-wide: create the writer only if missing. Two databases
-- migrating at once may race here; the loser sees the role already exists.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'acsledger_writer') THEN
        CREATE ROLE acsledger_writer NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;

-- The owner may act as the writer (the same URL can migrate and serve).
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'acsledger_writer', 'MEMBER') THEN
        EXECUTE format('GRANT acsledger_writer TO %I', current_user);
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;

-- sessions: one row per session, written once by the append that creates it.
CREATE TABLE sessions (
    seq        bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    session_id text PRIMARY KEY,
    agent_id   text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX sessions_agent_seq ON sessions (agent_id, seq);

-- heads: the mutable part, moved by compare-and-swap on (length, head).
CREATE TABLE heads (
    session_id text PRIMARY KEY REFERENCES sessions (session_id),
    length     bigint NOT NULL CHECK (length > 0),
    head       bytea NOT NULL CHECK (length(head) = 32),
    updated_at timestamptz NOT NULL
);

-- entries: the evidence. id is monotonically increasing in allocation
-- order (identity values may commit out of order). content holds the exact
-- canonical bytes entry_hash commits to (ACS §8.2).
CREATE TABLE entries (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id      text NOT NULL REFERENCES sessions (session_id),
    position        bigint NOT NULL CHECK (position >= 0),
    entry_hash      bytea NOT NULL CHECK (length(entry_hash) = 32),
    previous_hash   bytea CHECK (length(previous_hash) = 32),
    entry_id        text NOT NULL,
    step_id         text NOT NULL,
    step_type       text NOT NULL,
    entry_timestamp text NOT NULL,
    recorded_at     timestamptz NOT NULL,
    content         bytea NOT NULL,
    -- ACS §8.2: only the first entry has no previous_hash.
    CHECK ((position = 0) = (previous_hash IS NULL)),
    UNIQUE (session_id, position),
    UNIQUE (session_id, step_id)
);
CREATE INDEX entries_step_type ON entries (step_type, session_id);

-- responses: the signed Guardian response written beside an entry, in the
-- same transaction (ACS §8.6: it carries the entry's hash as chain_hash).
CREATE TABLE responses (
    session_id  text NOT NULL,
    position    bigint NOT NULL,
    response    bytea NOT NULL,
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (session_id, position),
    FOREIGN KEY (session_id, position) REFERENCES entries (session_id, position)
);

-- requests: the replay history (ACS §10.3): request_id and nonce seen per
-- session. nonce is '' when the request had none.
CREATE TABLE requests (
    session_id text NOT NULL,
    request_id text NOT NULL,
    nonce      text NOT NULL,
    seen_at    timestamptz NOT NULL,
    PRIMARY KEY (session_id, request_id)
);
CREATE UNIQUE INDEX requests_nonce ON requests (session_id, nonce) WHERE nonce <> '';

-- policy_bundles: every policy bundle version a decision may reference.
CREATE TABLE policy_bundles (
    seq         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id          text NOT NULL,
    version     text NOT NULL,
    digest      text NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
    content     bytea NOT NULL,
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (id, version)
);

CREATE FUNCTION acsledger_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'acsledger: % on % refused: the table is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;

-- Statement-level, so that even a statement touching no row is refused.
CREATE TRIGGER sessions_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON sessions
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();
CREATE TRIGGER entries_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON entries
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();
CREATE TRIGGER responses_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON responses
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();
CREATE TRIGGER requests_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON requests
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();
CREATE TRIGGER policy_bundles_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON policy_bundles
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();
CREATE TRIGGER heads_no_delete BEFORE DELETE OR TRUNCATE ON heads
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();

-- A head only moves forward and never changes session.
CREATE FUNCTION acsledger_head_forward() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.session_id <> OLD.session_id OR NEW.length <= OLD.length THEN
        RAISE EXCEPTION 'acsledger: head of session % may only move forward (length % -> %)',
            OLD.session_id, OLD.length, NEW.length
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER heads_forward BEFORE UPDATE ON heads
    FOR EACH ROW EXECUTE FUNCTION acsledger_head_forward();

REVOKE ALL ON sessions, heads, entries, responses, requests, policy_bundles FROM PUBLIC;
GRANT SELECT, INSERT ON sessions, entries, responses, requests, policy_bundles TO acsledger_writer;
GRANT SELECT, INSERT ON heads TO acsledger_writer;
GRANT UPDATE (length, head, updated_at) ON heads TO acsledger_writer;
