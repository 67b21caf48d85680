-- 0015: the exact source bytes of ingested records, kept beside their
-- entries and erasable. Run as the owner role.
--
-- Until now an ingested entry carried its record's source text inside the
-- chained content ("source_record"), so it could never be removed without
-- breaking every hash after it. From this version an ingested entry commits
-- to its source only by "source_sha256" (with the source's natural key and
-- format), and the bytes live here, written in the entry's transaction and
-- sealed at rest like request params (ledger/paramcrypt). Entries written
-- before keep their inline source_record; verifiers say so (source_inline).
--
--   - source_records holds one sealed record per ingested entry.
--   - source_erasures records each erasure of one (when, why, by whom),
--     append-only like erasures (0005), which it mirrors.
--   - A row of source_records may be deleted only once a source_erasures
--     row for the same (session_id, position) exists, inserted first in
--     the same transaction (ledger.SourceEraser.EraseSource). UPDATE and
--     TRUNCATE are refused for every role, the owner included.
--   - Only acsledger_eraser (0005) holds DELETE on source_records and
--     INSERT on source_erasures; the writer holds neither.
--
-- Both are partitioned by session like the other tables holding rows per
-- entry (0011), into the same 16 partitions.

-- source_records has no foreign key to entries: on the bulk ingest path a
-- key check into the partitioned entries costs about 45 us of PostgreSQL
-- CPU per row (as 0014 found for the log's queue; docs/benchmarks.md),
-- and what it would guarantee follows from who writes: the writer inserts
-- a row only in the ingest transaction that appends its entry, at the
-- position that append took (ledger/pgstore/ingestwrite.go), and entries
-- are never deleted. source_erasures, written rarely, keeps its key.
CREATE TABLE source_records (
    session_id    text NOT NULL,
    position      bigint NOT NULL,
    source_sha256 bytea NOT NULL CHECK (length(source_sha256) = 32),
    record        bytea NOT NULL,
    recorded_at   timestamptz NOT NULL,
    PRIMARY KEY (session_id, position)
) PARTITION BY HASH (session_id);

CREATE TABLE source_erasures (
    session_id text NOT NULL,
    position   bigint NOT NULL,
    erased_at  timestamptz NOT NULL,
    reason     text NOT NULL CHECK (btrim(reason) <> ''),
    erased_by  text NOT NULL,
    PRIMARY KEY (session_id, position),
    FOREIGN KEY (session_id, position) REFERENCES entries (session_id, position)
) PARTITION BY HASH (session_id);

DO $$
DECLARE
    t text;
    p text;
    ops text;
BEGIN
    FOREACH t IN ARRAY ARRAY['source_records', 'source_erasures'] LOOP
        FOR r IN 0..15 LOOP
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS 16, REMAINDER %s)',
                t || '_p' || lpad(r::text, 2, '0'), t, r);
        END LOOP;
        -- A statement trigger fires only for statements naming its own
        -- table: each partition gets one too (as 0011 does).
        ops := CASE WHEN t = 'source_records' THEN 'UPDATE OR TRUNCATE' ELSE 'UPDATE OR DELETE OR TRUNCATE' END;
        FOREACH p IN ARRAY ARRAY[t] || ARRAY(SELECT t || '_p' || lpad(r::text, 2, '0') FROM generate_series(0, 15) r) LOOP
            EXECUTE format('CREATE TRIGGER %I BEFORE %s ON %I FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change()',
                p || '_append_only', ops, p);
        END LOOP;
    END LOOP;
END
$$;

CREATE FUNCTION acsledger_source_erased_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM source_erasures
                   WHERE session_id = OLD.session_id AND position = OLD.position) THEN
        RAISE EXCEPTION 'acsledger: DELETE on source_records refused for session % position %: the table is append-only, and no erasure is recorded for the row',
            OLD.session_id, OLD.position
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN OLD;
END
$$;
-- A row trigger on the parent is cloned to each partition.
CREATE TRIGGER source_records_erased_only BEFORE DELETE ON source_records
    FOR EACH ROW EXECUTE FUNCTION acsledger_source_erased_only();

REVOKE ALL ON source_records, source_erasures FROM PUBLIC;
GRANT SELECT, INSERT ON source_records TO acsledger_writer;
GRANT SELECT ON source_erasures TO acsledger_writer;
GRANT SELECT, INSERT ON source_erasures TO acsledger_eraser;
GRANT SELECT, DELETE ON source_records TO acsledger_eraser;
