-- 0014: PostgreSQL's Merkle log queue is written only by its trigger and
-- loses its foreign key; SQLite has no roles, and its queue keeps its key.
-- The version is kept in step with migrations/postgres.
SELECT 1;
