-- 0019: sweeps and erasure requests erase the source records of ingested
-- entries (0015) as they erase request params (0016). Run as the owner
-- role.
--
--   - source_erasures.run_id names the run that erased a source record
--     (NULL for an erasure of one record by hand, acsledger erase
--     --source), as erasures.run_id does for params: a run cut short is
--     summarised from both tables.
--
-- The eraser's batch reads source_records, entries and sessions and the
-- standing holds; 0015 and 0016 granted each of those already.
ALTER TABLE source_erasures ADD COLUMN run_id text;
CREATE INDEX source_erasures_run_id ON source_erasures (run_id) WHERE run_id IS NOT NULL;
