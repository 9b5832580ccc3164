-- The twin of SQLite's 0030_cascade_without_foreign_keys, so that a version names the same step
-- in both dialects: PostgreSQL enforces its foreign keys for every writer, so their cascades
-- need no triggers.
SELECT 1;
