-- 0022: nothing to change here. Postgres's 0022 lets its store COPY the
-- search rows of the entries it COPYs, with the projection trigger
-- standing aside; SQLite has no COPY, and its projection (0010) runs in
-- the same statement as the entries' insert.
SELECT 1;
