-- 0011: nothing to do. postgres/0011_partitions.sql partitions the
-- evidence tables by session; an embedded ledger is one file on one
-- machine, where partitions would buy nothing (docs/storage.md,
-- "Partitioning"). The version exists so that both dialects count alike.
SELECT 1;
