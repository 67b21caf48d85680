-- 0021: the Merkle log's queue carries each entry's position and
-- entry_hash, so the integrator reads its batch from the queue alone.
-- Run as the owner role.
--
-- The integrator read each queued entry's session, position and hash by
-- joining tlog_pending to entries on (session_id, id): one index lookup in
-- a partition of entries per leaf, about 29 us of PostgreSQL CPU per entry
-- in the bulk ingest benchmark (docs/benchmarks.md, issue 25, lever 3),
-- a fifth of the ingest's own database work. The enqueue trigger already
-- holds those columns in its transition table; it now writes them beside
-- the entry's id.
--
-- What the join guaranteed still holds: only this trigger, running with
-- its owner's rights, writes the queue (0014: the writer has no INSERT on
-- it), and it copies the rows of the statement's own new entries, which
-- never change afterwards (entries are append-only).

ALTER TABLE tlog_pending ADD COLUMN position bigint, ADD COLUMN entry_hash bytea;
UPDATE tlog_pending p SET position = e.position, entry_hash = e.entry_hash
FROM entries e WHERE e.session_id = p.session_id AND e.id = p.entry_id;
-- A queued row naming no entry would fail here, loudly, rather than be
-- integrated as a leaf without a hash.
ALTER TABLE tlog_pending ALTER COLUMN position SET NOT NULL, ALTER COLUMN entry_hash SET NOT NULL;

-- CREATE OR REPLACE resets what 0014 set on the function, so it is set
-- again.
CREATE OR REPLACE FUNCTION tlog_enqueue_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tlog_pending (entry_id, session_id, position, entry_hash)
    SELECT id, session_id, position, entry_hash FROM new_entries;
    RETURN NULL;
END
$$;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION tlog_enqueue_rows() SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION tlog_enqueue_rows() FROM PUBLIC;
