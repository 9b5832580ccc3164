-- The settling triggers find the settled jobs by key, and claims update in place (issue 25,
-- the queue core).
--
-- owed_screens_settled and owed_scores_settled (0019) delete a batch's jobs with
-- DELETE … USING n (the transition table). Planned afresh for each batch, that join turned into
-- a hash join over a sequential scan of content_jobs whenever the statistics made the table
-- look small next to the batch: at 50,000 owed jobs one batch of 128 verdicts in three read the
-- whole table (a bench run of 20,000 jobs read 974,000 rows that way). With enable_seqscan off,
-- as the kept-row functions of 0019 already run, each settled job is one lookup in the
-- (task, kind, item_id) index; the functions' other statements read revisions, scores and songs
-- by key already.
ALTER FUNCTION owed_screens_settled() SET enable_seqscan = off;
ALTER FUNCTION owed_scores_settled() SET enable_seqscan = off;

-- A claim leases a run of jobs in due order, which are mostly neighbours on a page, in one
-- statement; the old versions it leaves cannot be pruned before it ends, so every new version
-- must fit in the page's free space to be a HOT update (no new entries in content_jobs' five
-- indexes). 0004's 30 % left room for about four in ten of a page's rows (a bench run: 44 % of
-- the claims' updates HOT); with 55 % free every lease update fits (100 %). The table holds
-- only owed jobs, so the room costs little; it applies to pages written from now on.
ALTER TABLE content_jobs SET (fillfactor = 45);
