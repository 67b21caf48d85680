-- 0019: the search projection is maintained after the commit, not in it.
-- Run as the owner role.
--
-- 0010-0013 projected every entry into search_entries in the appending
-- transaction (a jsonb parse of its content and a row in a table of ten
-- indexes), and 0010's params trigger updated the row when the tool name
-- came in a later statement. The decision's transaction now only queues
-- the entry (search_pending, a narrow row by a statement trigger, like the
-- Merkle log's tlog_pending), and the store projects queued entries in
-- batches after they commit (ledger/internal/sqlstore, ProjectSearch): a
-- search first drains a bounded number of them, a background loop drains
-- the rest, and every search answers how far the projection is behind
-- (how long ago the oldest queued entry was recorded, by the store's
-- clock). A projected row is written whole,
-- with its tool name, in the transaction that dequeues its entry, so a
-- search sees an entry completely or not at all.
--
-- The queue is not evidence: the projector deletes what it projected. Only
-- the trigger writes it (SECURITY DEFINER, as 0014 did for the log's
-- queue); the writer may read and delete.

CREATE TABLE search_pending (
    entry_id   bigint PRIMARY KEY,
    session_id text NOT NULL,
    queued_at  timestamptz NOT NULL -- the entry's recorded_at
);

CREATE FUNCTION search_enqueue_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_pending (entry_id, session_id, queued_at) SELECT id, session_id, recorded_at FROM new_entries;
    RETURN NULL;
END
$$;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION search_enqueue_rows() SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION search_enqueue_rows() FROM PUBLIC;

DROP TRIGGER entries_search ON entries;
DROP TRIGGER request_params_search ON request_params;
CREATE TRIGGER entries_search_enqueue AFTER INSERT ON entries
    REFERENCING NEW TABLE AS new_entries
    FOR EACH STATEMENT EXECUTE FUNCTION search_enqueue_rows();

REVOKE ALL ON search_pending FROM PUBLIC;
GRANT SELECT, DELETE ON search_pending TO acsledger_writer;
