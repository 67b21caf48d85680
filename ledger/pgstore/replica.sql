-- Named queries of a read replica (replica.go): where a primary's WAL is,
-- and how far a streaming standby has replayed it.

-- name: WALPosition
-- On the primary: the end of the WAL written so far. Every commit that has
-- returned lies before it.
SELECT pg_current_wal_lsn()::text;

-- name: ReplayPosition
-- On a standby: the WAL replayed so far and the commit time of the last
-- transaction replayed (the primary's clock). Both are NULL on a server
-- that is not in recovery.
SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text, pg_last_xact_replay_timestamp(), now();
