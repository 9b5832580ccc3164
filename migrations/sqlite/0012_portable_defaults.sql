-- The times the database fills in (created_at, screened_at, scored_at) without
-- unixepoch('subsec'), which SQLite knows only from 3.42 on: an older sqlite3 (Debian 12 has
-- 3.40) reads it as NULL, so a raw INSERT that leaves the time to the database, or that makes
-- a row whose trigger inserts owed work, failed on NOT NULL. julianday('now') exists in every
-- SQLite; the same milliseconds since the epoch, rounded (a day's fraction is exact to well
-- under a microsecond). The tables keep their rows: SQLite cannot change a column's default by
-- ALTER TABLE, and the documented way for a default alone is to rewrite the table's definition
-- in sqlite_master (https://sqlite.org/lang_altertable.html, "making other kinds of table
-- schema changes"); the table made and dropped after it changes the schema's version, so
-- every connection reads the new definitions.
PRAGMA writable_schema = ON;
UPDATE sqlite_master
   SET sql = replace(sql, 'CAST(unixepoch(''subsec'') * 1000 AS INTEGER)',
                     'CAST(round((julianday(''now'') - 2440587.5) * 86400000) AS INTEGER)')
 WHERE type = 'table' AND sql LIKE '%unixepoch(''subsec'')%';
PRAGMA writable_schema = OFF;
CREATE TABLE owed_schema_version_bump (x INTEGER);
DROP TABLE owed_schema_version_bump;
