-- The twin of PostgreSQL's 0004_claim_room, so that a version names the same step in both
-- dialects. PostgreSQL leaves room on content_jobs pages for in-place lease updates; SQLite
-- has no such setting (it rewrites a row in place whenever it fits), so here it changes nothing.
SELECT 1;
