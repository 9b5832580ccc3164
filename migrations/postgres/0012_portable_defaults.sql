-- The twin of SQLite's 0012_portable_defaults, so that a version names the same step in both
-- dialects. There the defaults of times stop using unixepoch('subsec') (SQLite 3.42+), so raw
-- SQL from an older sqlite3 works; PostgreSQL's defaults are fine as they are.
SELECT 1;
