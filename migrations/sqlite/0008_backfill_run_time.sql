-- Backfill rates over running time only (issue 13). A job's measured rate counted every row
-- since Start was pressed over the wall time since then, so time spent queued, paused, behind
-- a walk or across a restart made it look slow. The runner now adds, after each batch, the time
-- it actually spent running batches (fetching, cooling down, retrying suspects; not waiting out
-- a rate limit or a walk) and the rows that batch took off pending.
--   run_ms            running time of this run, ms
--   run_rows          rows this run took off pending (cached, skipped, failed or suspect)
--   recent_per_minute the smoothed recent rate (an exponentially weighted mean over running
--                     time), kept from the first batch on; per_minute reports it after 30 s
ALTER TABLE backfill_jobs ADD COLUMN run_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE backfill_jobs ADD COLUMN run_rows INTEGER NOT NULL DEFAULT 0;
ALTER TABLE backfill_jobs ADD COLUMN recent_per_minute REAL;

-- A rate measured the old way (over wall time since Start) is not one over running time: drop
-- it, and the job shows the estimate until its next 30 s of running time.
UPDATE backfill_jobs SET per_minute = NULL WHERE state = 'running';
