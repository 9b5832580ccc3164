-- The twin of SQLite's 0028_exact_next_due, so that a version names the same step in both
-- dialects: PostgreSQL keeps a bound on an author's earliest due time (0015), whose exact upkeep
-- would be paid by every recording statement of the queue core (models.dueMemo serves it).
SELECT 1;
