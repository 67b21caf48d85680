-- 0014: only the Merkle log's enqueue trigger writes its queue, and the
-- queue's foreign key to entries goes. Run as the owner role.
--
-- tlog_pending's key to entries (0002, on (session_id, entry_id) since
-- 0011) kept the writer role, which held INSERT on the queue for the
-- trigger's sake, from queueing an entry that does not exist; the
-- integrator's dequeue check relies on the queue naming real entries
-- (ledger/pgstore/logstorage.go). Each queued row paid a key check: a
-- lookup in entries, with a row lock, about 44 us of PostgreSQL CPU per
-- entry in the ingest benchmark (docs/benchmarks.md).
--
-- The trigger now runs with its owner's rights (SECURITY DEFINER, with a
-- fixed search_path), the writer loses INSERT on the queue, and what the
-- key guaranteed follows from who can write: only the trigger, which
-- queues the rows of new_entries, the statement's own new entries. The
-- writer keeps SELECT and DELETE, which the integrator needs.

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION tlog_enqueue_rows() SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END
$$;
REVOKE INSERT ON tlog_pending FROM acsledger_writer;
REVOKE EXECUTE ON FUNCTION tlog_enqueue_rows() FROM PUBLIC;

DO $$
DECLARE
    fk name;
BEGIN
    FOR fk IN SELECT conname FROM pg_constraint
              WHERE conrelid = 'tlog_pending'::regclass AND contype = 'f' AND conparentid = 0 LOOP
        EXECUTE format('ALTER TABLE tlog_pending DROP CONSTRAINT %I', fk);
    END LOOP;
END
$$;
