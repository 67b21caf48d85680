-- 0002: the Merkle log (ledger/tlog). Run as the owner role after 0001.
--
-- Sequencing: an AFTER INSERT trigger on entries queues every new entry id
-- in tlog_pending, in the inserting transaction. The integrator reads the
-- queue, writes leaves and deletes the queue rows in one transaction. So an
-- identity value that commits out of order is never skipped (its queue row
-- commits with it), and the integrator never scans entries that already
-- have leaves.

CREATE TABLE tlog_pending (
    entry_id bigint PRIMARY KEY REFERENCES entries (id)
);

CREATE FUNCTION tlog_enqueue() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tlog_pending (entry_id) VALUES (NEW.id);
    RETURN NULL;
END
$$;
CREATE TRIGGER entries_tlog_enqueue AFTER INSERT ON entries
    FOR EACH ROW EXECUTE FUNCTION tlog_enqueue();

-- Entries stored before this migration get leaves too.
INSERT INTO tlog_pending (entry_id) SELECT id FROM entries;

-- tlog_leaves: leaf idx of the tree; data is the JCS leaf that is hashed.
-- entry_id has no foreign key: the integrator deletes every leaf's entry
-- from tlog_pending (which references entries) in the leaf's transaction
-- and refuses the batch unless each was there, so a leaf names an existing
-- entry by construction, and a per-row key check would cost a third of the
-- insert. entry_hash lookups are equality only: a hash index costs almost
-- nothing to maintain, where a btree over random 32-byte keys doubled the
-- cost of writing a leaf (docs/benchmarks.md, Merkle log).
CREATE TABLE tlog_leaves (
    idx        bigint PRIMARY KEY CHECK (idx >= 0),
    entry_id   bigint NOT NULL UNIQUE,
    entry_hash bytea NOT NULL CHECK (length(entry_hash) = 32),
    data       bytea NOT NULL CHECK (length(data) <= 65535)
);
CREATE INDEX tlog_leaves_entry_hash ON tlog_leaves USING hash (entry_hash);

-- tlog_tiles: full tiles only (256 hashes of tree level 8*level), written
-- once. root is the hash they reduce to, so partial tiles of the level
-- above are read without rehashing.
CREATE TABLE tlog_tiles (
    level smallint NOT NULL CHECK (level BETWEEN 0 AND 7),
    idx   bigint NOT NULL CHECK (idx >= 0),
    data  bytea NOT NULL CHECK (length(data) = 8192),
    root  bytea NOT NULL CHECK (length(root) = 32),
    PRIMARY KEY (level, idx)
);

-- tlog_checkpoints: every signed checkpoint, one per tree size.
CREATE TABLE tlog_checkpoints (
    size       bigint PRIMARY KEY CHECK (size > 0),
    note       bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- tlog_head: the latest checkpoint, one row, moved by compare-and-swap.
CREATE TABLE tlog_head (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    size      bigint NOT NULL REFERENCES tlog_checkpoints (size),
    note      bytea NOT NULL
);

-- tlog_cosignatures: witness signature lines per checkpoint size.
CREATE TABLE tlog_cosignatures (
    size       bigint NOT NULL REFERENCES tlog_checkpoints (size),
    line       bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (size, line)
);

CREATE TRIGGER tlog_leaves_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tlog_leaves
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();
CREATE TRIGGER tlog_tiles_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tlog_tiles
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();
CREATE TRIGGER tlog_checkpoints_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tlog_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();
CREATE TRIGGER tlog_cosignatures_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON tlog_cosignatures
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();
CREATE TRIGGER tlog_head_no_delete BEFORE DELETE OR TRUNCATE ON tlog_head
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();

-- The latest checkpoint only moves to a larger tree.
CREATE FUNCTION tlog_head_forward() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.size <= OLD.size THEN
        RAISE EXCEPTION 'acsledger: the latest checkpoint may only move forward (size % -> %)',
            OLD.size, NEW.size
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER tlog_head_forward BEFORE UPDATE ON tlog_head
    FOR EACH ROW EXECUTE FUNCTION tlog_head_forward();

REVOKE ALL ON tlog_pending, tlog_leaves, tlog_tiles, tlog_checkpoints, tlog_head, tlog_cosignatures FROM PUBLIC;
-- The queue is not evidence: the integrator deletes what it sequenced.
GRANT SELECT, INSERT, DELETE ON tlog_pending TO acsledger_writer;
GRANT SELECT, INSERT ON tlog_leaves, tlog_tiles, tlog_checkpoints, tlog_cosignatures TO acsledger_writer;
GRANT SELECT, INSERT ON tlog_head TO acsledger_writer;
GRANT UPDATE (size, note) ON tlog_head TO acsledger_writer;
