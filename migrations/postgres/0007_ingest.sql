-- 0007: records ingested from other systems (ingest/, docs/ingest.md).
-- Run as the owner role.
--
-- ingest_records: one row per accepted record, naming the entry it became.
-- (source, natural_key) is unique, which is what makes ingest idempotent:
-- a redelivered record finds its key and is a duplicate. replay_key (A2H
-- jti) is unique per source where set. digest identifies the content, so
-- the same key with other content is told from a retry. The source bytes
-- themselves are inside the entry (docs/ingest.md), which commits to them.
--
-- ingest_quarantine: every record that was not appended, with its reason,
-- exact bytes, file and record number. Nothing is dropped; re-running a
-- file does not repeat a row (the unique key).
--
-- Both are evidence: append-only like the other evidence tables.
CREATE TABLE ingest_records (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source      text NOT NULL,
    natural_key text NOT NULL,
    replay_key  text,
    digest      bytea NOT NULL CHECK (length(digest) = 32),
    session_id  text NOT NULL,
    position    bigint NOT NULL,
    entry_hash  bytea NOT NULL CHECK (length(entry_hash) = 32),
    flags       text[] NOT NULL DEFAULT '{}',
    file        text NOT NULL,
    record      bigint NOT NULL,
    recorded_at timestamptz NOT NULL,
    UNIQUE (source, natural_key)
);
-- (session_id, position) has no foreign key: a row is inserted only in
-- the transaction that appends its entry, so it names an existing entry by
-- construction, and a per-row key check would slow bulk ingest (as for
-- tlog_leaves, 0002). Most records carry no flag: only flagged ones are
-- indexed.
CREATE UNIQUE INDEX ingest_records_replay ON ingest_records (source, replay_key) WHERE replay_key IS NOT NULL;
CREATE INDEX ingest_records_flags ON ingest_records USING gin (flags) WHERE flags <> '{}';

CREATE TABLE ingest_quarantine (
    seq            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source         text NOT NULL,
    natural_key    text NOT NULL,
    file           text NOT NULL,
    record         bigint NOT NULL,
    reason         text NOT NULL,
    detail         text NOT NULL,
    raw            bytea NOT NULL,
    raw_sha256     bytea NOT NULL CHECK (length(raw_sha256) = 32),
    quarantined_at timestamptz NOT NULL,
    UNIQUE (source, file, record, raw_sha256)
);
CREATE INDEX ingest_quarantine_source ON ingest_quarantine (source, seq);

CREATE TRIGGER ingest_records_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON ingest_records
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();
CREATE TRIGGER ingest_quarantine_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON ingest_quarantine
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();

REVOKE ALL ON ingest_records, ingest_quarantine FROM PUBLIC;
GRANT SELECT, INSERT ON ingest_records, ingest_quarantine TO acsledger_writer;


-- Bulk appends (ingest batches of thousands, and any multi-row insert or
-- COPY of entries) queue their entries for the Merkle log with one
-- statement per insert instead of one trigger call and one INSERT per
-- row: the same tlog_pending rows, in the same transaction, so 0002's
-- contract is unchanged.
CREATE FUNCTION tlog_enqueue_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tlog_pending (entry_id) SELECT id FROM new_entries;
    RETURN NULL;
END
$$;
DROP TRIGGER entries_tlog_enqueue ON entries;
CREATE TRIGGER entries_tlog_enqueue AFTER INSERT ON entries
    REFERENCING NEW TABLE AS new_entries
    FOR EACH STATEMENT EXECUTE FUNCTION tlog_enqueue_rows();
