-- 0019: the search projection is maintained after the commit. Mirrors
-- postgres/0019_search_after_commit.sql: the append only queues the entry,
-- the store projects queued entries in batches (search_projection, 0010)
-- and searches say how far behind the projection is.

CREATE TABLE search_pending (
    entry_id   INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    queued_at  INTEGER NOT NULL
);

DROP TRIGGER entries_search;
DROP TRIGGER request_params_search;
CREATE TRIGGER entries_search_enqueue AFTER INSERT ON entries
BEGIN
    INSERT INTO search_pending (entry_id, session_id, queued_at) VALUES (NEW.id, NEW.session_id, NEW.recorded_at);
END;
