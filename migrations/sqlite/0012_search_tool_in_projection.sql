-- 0012: nothing changes in SQLite. postgres/0012 lets the search projection
-- read an entry's tool name from params written in the same statement; the
-- SQLite store writes row by row and its 0010 triggers stay as they are.
SELECT 1;
