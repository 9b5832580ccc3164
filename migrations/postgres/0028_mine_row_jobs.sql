-- The twin of SQLite's 0028_mine_row_jobs, so that a version names the same step in both
-- dialects: PostgreSQL keeps no mine_rows (see 0026), and reads a page's owed jobs by key.
SELECT 1;
