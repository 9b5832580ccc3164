-- Backfill honesty (issue 24, item 7).
--   run_wait_ms  the rate-limit waits (Retry-After) this run sat out, ms: the measured rate
--                counts them once the run has had two or more (run_waits), so that under
--                steady 429s the rate and ETAs say how fast pending really falls
--   run_waits    how many rate-limit waits this run sat out
ALTER TABLE backfill_jobs ADD COLUMN run_wait_ms bigint NOT NULL DEFAULT 0;
ALTER TABLE backfill_jobs ADD COLUMN run_waits integer NOT NULL DEFAULT 0;

-- started_at is now set when a run's first batch begins, not when Start is pressed: a job
-- that is still queued and never ran a batch of this run (no running time, no rows) has not
-- started. The runner sets it again when it takes the job.
UPDATE backfill_jobs SET started_at = NULL WHERE state = 'running' AND run_ms = 0 AND run_rows = 0 AND processed = 0;
