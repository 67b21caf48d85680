-- 0013: PostgreSQL's search projection parses an entry's content once
-- (issue 12's ingest speed); SQLite's (0010) needs no change. The version
-- is kept in step with migrations/postgres.
SELECT 1;
