-- 0021: nothing to change here. Postgres's 0021 has the Merkle log's
-- queue carry each entry's position and hash, to spare the integrator a
-- lookup in a partition of entries per leaf. SQLite's queue is keyed by
-- the entries' own rowid, and its integrator's join (sqlitestore's
-- LogPending) is a rowid lookup, which costs about as much as reading
-- the columns from the queue would.
SELECT 1;
