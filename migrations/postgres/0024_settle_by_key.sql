-- The settling triggers find the settled jobs by key (issue 25, the queue core).
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
