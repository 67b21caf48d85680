-- 0011: the evidence that grows with entries, partitioned by session.
-- Run as the owner role.
--
-- entries and the tables holding rows per entry (responses,
-- request_params, erasures), the replay history (requests) and the search
-- projection (search_entries) become tables partitioned by
-- HASH (session_id) into 16 partitions each, the same 16 for every table,
-- so that a session's rows of every table live in the partitions with the
-- same number. Why by session and not by time, and what stays whole
-- (sessions, heads, the Merkle log, ingest records), is argued in
-- docs/storage.md, "Partitioning".
--
-- Every unique key of these tables already begins with session_id except
-- the identity keys: entries' and search_entries' primary keys become
-- (id, session_id), since PostgreSQL requires the partition key in every
-- unique constraint of a partitioned table. id alone stays unique because
-- one identity sequence allocates it; id leads the key, so a lookup by id
-- alone still reads an index in each partition. The Merkle log's queue,
-- which referenced entries (id), now carries session_id and references
-- (session_id, id).
--
-- The conversion runs in Migrate's one transaction: each table is renamed
-- away with its indexes, a partitioned twin is created under the old name,
-- the rows are copied (keeping every id), the old tables are dropped, and
-- the triggers and grants of 0001-0010 are recreated on the twins, after
-- the copy so that the copy neither re-queues entries for the log nor
-- re-projects them. The writer is locked out meanwhile (renaming takes each
-- table's exclusive lock); on a large ledger this is a maintenance window
-- (docs/storage.md, "Partitioning", upgrading).

-- Move the unpartitioned tables and their indexes, constraints and
-- sequences out of the way, under a _v10 suffix, so that the twins' take
-- the names 0001-0010 gave them.
DO $$
DECLARE
    t text;
    i text;
    seq text;
BEGIN
    FOREACH t IN ARRAY ARRAY['entries', 'responses', 'request_params', 'requests', 'erasures', 'search_entries'] LOOP
        seq := CASE WHEN t IN ('entries', 'search_entries') THEN pg_get_serial_sequence(t, 'id') END;
        EXECUTE format('ALTER TABLE %I RENAME TO %I', t, t || '_v10');
        FOR i IN SELECT c.relname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
                 WHERE x.indrelid = (t || '_v10')::regclass LOOP
            EXECUTE format('ALTER INDEX %I RENAME TO %I', i, i || '_v10');
        END LOOP;
        FOR i IN SELECT conname FROM pg_constraint
                 WHERE conrelid = (t || '_v10')::regclass AND contype IN ('c', 'f') LOOP
            EXECUTE format('ALTER TABLE %I RENAME CONSTRAINT %I TO %I', t || '_v10', i, i || '_v10');
        END LOOP;
        IF seq IS NOT NULL THEN
            EXECUTE format('ALTER SEQUENCE %s RENAME TO %I', seq, t || '_v10_id_seq');
        END IF;
    END LOOP;
END
$$;

-- The twins: columns, checks and keys as 0001-0010 left them.
CREATE TABLE entries (
    id              bigint GENERATED ALWAYS AS IDENTITY,
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
    PRIMARY KEY (id, session_id),
    UNIQUE (session_id, position),
    UNIQUE (session_id, step_id)
) PARTITION BY HASH (session_id);

CREATE TABLE responses (
    session_id  text NOT NULL,
    position    bigint NOT NULL,
    response    bytea NOT NULL,
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (session_id, position),
    FOREIGN KEY (session_id, position) REFERENCES entries (session_id, position)
) PARTITION BY HASH (session_id);

CREATE TABLE request_params (
    session_id  text NOT NULL,
    position    bigint NOT NULL,
    params      bytea NOT NULL,
    recorded_at timestamptz NOT NULL,
    tool_name   text,
    PRIMARY KEY (session_id, position),
    FOREIGN KEY (session_id, position) REFERENCES entries (session_id, position)
) PARTITION BY HASH (session_id);

CREATE TABLE requests (
    session_id text NOT NULL,
    request_id text NOT NULL,
    nonce      text NOT NULL,
    seen_at    timestamptz NOT NULL,
    PRIMARY KEY (session_id, request_id)
) PARTITION BY HASH (session_id);

CREATE TABLE erasures (
    session_id text NOT NULL,
    position   bigint NOT NULL,
    erased_at  timestamptz NOT NULL,
    reason     text NOT NULL CHECK (btrim(reason) <> ''),
    erased_by  text NOT NULL,
    PRIMARY KEY (session_id, position),
    FOREIGN KEY (session_id, position) REFERENCES entries (session_id, position)
) PARTITION BY HASH (session_id);

CREATE TABLE search_entries (
    id            bigint GENERATED ALWAYS AS IDENTITY,
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
    PRIMARY KEY (id, session_id),
    UNIQUE (session_id, position)
) PARTITION BY HASH (session_id);

-- Partitions <table>_p00 .. <table>_p15. Sixteen keeps a partition of a
-- billion-entry ledger near 60 million rows; a partition can later be
-- split in two (modulus 32, remainders r and r + 16) without touching the
-- others (docs/storage.md).
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['entries', 'responses', 'request_params', 'requests', 'erasures', 'search_entries'] LOOP
        FOR r IN 0..15 LOOP
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS 16, REMAINDER %s)',
                t || '_p' || lpad(r::text, 2, '0'), t, r);
        END LOOP;
    END LOOP;
END
$$;

-- The rows, ids kept; parents before the rows that reference them.
INSERT INTO entries (id, session_id, position, entry_hash, previous_hash, entry_id, step_id,
    step_type, entry_timestamp, recorded_at, content)
OVERRIDING SYSTEM VALUE
SELECT id, session_id, position, entry_hash, previous_hash, entry_id, step_id,
    step_type, entry_timestamp, recorded_at, content
FROM entries_v10 ORDER BY id;
INSERT INTO responses SELECT session_id, position, response, recorded_at FROM responses_v10;
INSERT INTO request_params SELECT session_id, position, params, recorded_at, tool_name FROM request_params_v10;
INSERT INTO requests SELECT session_id, request_id, nonce, seen_at FROM requests_v10;
INSERT INTO erasures SELECT session_id, position, erased_at, reason, erased_by FROM erasures_v10;
INSERT INTO search_entries (id, session_id, position, agent_id, recorded_at, step_id, step_type,
    disposition, reason_codes, policy_refs, tool_name, source, flags, reasoning)
OVERRIDING SYSTEM VALUE
SELECT id, session_id, position, agent_id, recorded_at, step_id, step_type,
    disposition, reason_codes, policy_refs, tool_name, source, flags, reasoning
FROM search_entries_v10 ORDER BY id;

-- The identities go on from where the old ones were, so ids keep
-- increasing in allocation order.
SELECT setval(pg_get_serial_sequence('entries', 'id'), last_value, is_called) FROM entries_v10_id_seq;
SELECT setval(pg_get_serial_sequence('search_entries', 'id'), last_value, is_called) FROM search_entries_v10_id_seq;

-- The Merkle log's queue names its entries by (session_id, id).
ALTER TABLE tlog_pending DROP CONSTRAINT tlog_pending_entry_id_fkey;
ALTER TABLE tlog_pending ADD COLUMN session_id text;
UPDATE tlog_pending p SET session_id = e.session_id FROM entries_v10 e WHERE e.id = p.entry_id;
ALTER TABLE tlog_pending ALTER COLUMN session_id SET NOT NULL;
ALTER TABLE tlog_pending ADD FOREIGN KEY (session_id, entry_id) REFERENCES entries (session_id, id);

DROP TABLE erasures_v10, request_params_v10, responses_v10, requests_v10, search_entries_v10, entries_v10;

-- Indexes of 0001, 0004 and 0010 (each partition gets its own).
CREATE INDEX entries_step_type ON entries (step_type, session_id);
CREATE INDEX entries_step_id ON entries (step_id, session_id);
CREATE UNIQUE INDEX requests_nonce ON requests (session_id, nonce) WHERE nonce <> '';
CREATE INDEX search_entries_agent ON search_entries (agent_id, id);
CREATE INDEX search_entries_recorded ON search_entries (recorded_at, id);
CREATE INDEX search_entries_disposition ON search_entries (disposition, id);
CREATE INDEX search_entries_tool ON search_entries (tool_name, id) WHERE tool_name <> '';
CREATE INDEX search_entries_source ON search_entries (source, id);
CREATE INDEX search_entries_reason_codes ON search_entries USING gin (reason_codes);
CREATE INDEX search_entries_policy_refs ON search_entries USING gin (policy_refs);
CREATE INDEX search_entries_flags ON search_entries USING gin (flags);
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_trgm') THEN
        EXECUTE 'CREATE INDEX search_entries_reasoning ON search_entries USING gin (reasoning gin_trgm_ops)';
    END IF;
END
$$;

-- The append-only guards of 0001, 0003 and 0005. A statement trigger on a
-- partitioned table fires only for statements naming that table, so each
-- partition gets its own as well: the owner, who may name a partition,
-- is refused there too. (The writer holds no privilege on a partition.)
-- The row trigger request_params_erased_only is cloned to each partition
-- by PostgreSQL.
DO $$
DECLARE
    t text;
    p text;
    ops text;
BEGIN
    FOREACH t IN ARRAY ARRAY['entries', 'responses', 'request_params', 'requests', 'erasures'] LOOP
        -- request_params: DELETE is checked per row against erasures (0005).
        ops := CASE WHEN t = 'request_params' THEN 'UPDATE OR TRUNCATE' ELSE 'UPDATE OR DELETE OR TRUNCATE' END;
        FOREACH p IN ARRAY ARRAY[t] || ARRAY(SELECT t || '_p' || lpad(r::text, 2, '0') FROM generate_series(0, 15) r) LOOP
            EXECUTE format('CREATE TRIGGER %I BEFORE %s ON %I FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change()',
                p || '_append_only', ops, p);
        END LOOP;
    END LOOP;
END
$$;
CREATE TRIGGER request_params_erased_only BEFORE DELETE ON request_params
    FOR EACH ROW EXECUTE FUNCTION acsledger_erased_only();

-- The Merkle log's queue (0002, 0007), now with the session.
CREATE OR REPLACE FUNCTION tlog_enqueue_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tlog_pending (entry_id, session_id) SELECT id, session_id FROM new_entries;
    RETURN NULL;
END
$$;
CREATE TRIGGER entries_tlog_enqueue AFTER INSERT ON entries
    REFERENCING NEW TABLE AS new_entries
    FOR EACH STATEMENT EXECUTE FUNCTION tlog_enqueue_rows();

-- The search projection (0010). Statement triggers with transition tables
-- on the partitioned table see every row the statement routed to any
-- partition.
CREATE TRIGGER entries_search AFTER INSERT ON entries
    REFERENCING NEW TABLE AS new_entries
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_search_entries();
CREATE TRIGGER request_params_search AFTER INSERT ON request_params
    REFERENCING NEW TABLE AS new_params
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_search_params();

-- Privileges as 0001, 0003, 0005 and 0010 granted them, on the parents
-- only: a statement naming the parent is checked against the parent's
-- privileges, and no role but the owner may name a partition.
REVOKE ALL ON entries, responses, request_params, requests, erasures, search_entries FROM PUBLIC;
GRANT SELECT, INSERT ON entries, responses, requests, request_params TO acsledger_writer;
GRANT SELECT ON erasures TO acsledger_writer;
GRANT SELECT, INSERT ON erasures TO acsledger_eraser;
GRANT SELECT, DELETE ON request_params TO acsledger_eraser;
GRANT SELECT, INSERT, UPDATE ON search_entries TO acsledger_writer;

-- A converted ledger gets its statistics now. A new one is left without:
-- analyzed empty, its partitions would make every cached generic plan a
-- sequential scan, kept while they grow (docs/benchmarks.md, "The log
-- queue without its foreign key"); never analyzed, the planner assumes a
-- few pages and probes the keys' indexes, until autovacuum's ANALYZE.
DO $$
BEGIN
    IF EXISTS (SELECT FROM entries) THEN
        ANALYZE entries, responses, request_params, requests, erasures, search_entries, tlog_pending;
    END IF;
END
$$;
