-- A claim rewrites a job's lease columns, and a rescheduled attempt its due time and why. With
-- room left on each page, PostgreSQL can keep the new row version on the same page (a HOT
-- update: no new index entries when no indexed column changed), which is what most claims
-- are. Pages written from now on keep 30% free; existing ones gain it as they are rewritten.
ALTER TABLE content_jobs SET (fillfactor = 70);
