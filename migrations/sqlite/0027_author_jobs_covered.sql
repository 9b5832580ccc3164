-- The author's view reads every owed job of its author (at most 513 of them: models.authorJobs)
-- for the fields it shows: task, kind, item, due time, attempts and why. Carried by
-- content_jobs_user_due, they are read from the index alone, not from a random page of the
-- table for each job (on SQLite half the time of a view's jobs). A claim sets only the lease,
-- which the index does not carry; a retry or a park moves due_at, which it always carried.
DROP INDEX content_jobs_user_due;
CREATE INDEX content_jobs_user_due ON content_jobs (user_id, due_at, task, kind, item_id, attempts, why, id);
