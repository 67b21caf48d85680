-- 0009: session ownership and a service that can read the schema version.
-- Run as the owner role.
--
-- writer: the kind of writer that created the session and the only kind
-- whose entries it accepts (ledger.Record.Writer): 'guardian' for this
-- ledger's Guardian, 'external' for the plain append API and ingest.
-- Sessions created before this migration are the Guardian's when they hold
-- a signed response (only the Guardian stores one), external otherwise.
ALTER TABLE sessions ADD COLUMN writer text NOT NULL DEFAULT 'external'
    CHECK (writer IN ('external', 'guardian'));

-- sessions is append-only for every role; the owner lifts the trigger for
-- this one backfill, inside the migration's transaction.
ALTER TABLE sessions DISABLE TRIGGER sessions_append_only;
UPDATE sessions s SET writer = 'guardian'
WHERE EXISTS (SELECT FROM responses r WHERE r.session_id = s.session_id);
ALTER TABLE sessions ENABLE TRIGGER sessions_append_only;

-- The service reads the applied versions at start, so that it refuses a
-- schema older than its code instead of migrating it (only `acsledger
-- migrate`, as the owner, changes the schema).
GRANT SELECT ON schema_migrations TO acsledger_writer;
