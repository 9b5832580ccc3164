-- The twin of PostgreSQL's 0024_settle_by_key, so that a version names the same step in both
-- dialects. There it makes the settling triggers find a batch's jobs by key and leaves room on
-- content_jobs' pages for lease updates; SQLite settles each verdict by its row's trigger, a
-- lookup by key already, and has no fill factor, so here it changes nothing.
SELECT 1;
