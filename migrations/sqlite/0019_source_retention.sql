-- 0019: sweeps and erasure requests erase the source records of ingested
-- entries (0015) as they erase request params (0016). Mirrors
-- postgres/0019_source_retention.sql: source_erasures.run_id names the run
-- that erased a source record (NULL for an erasure by hand).
ALTER TABLE source_erasures ADD COLUMN run_id TEXT;
CREATE INDEX source_erasures_run_id ON source_erasures (run_id) WHERE run_id IS NOT NULL;
