-- One completion path for a job (issue 29): every run ends in an attempt, a release or a
-- put-off. Two whys are stored now: 'refused' (a request the model client refuses before
-- sending, or a task this process does not run: an attempt with the backoff instead of a job
-- that comes back every lease period unseen) and 'unavailable' (the database failed while the
-- job ran: an attempt with the backoff instead of a lease left to run out). The CHECK on
-- content_jobs.why gains both, in place, as 0018 did for 'review': widening a CHECK leaves
-- every stored row valid.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql, '''review''', '''review'', ''unavailable'', ''refused''')
    WHERE type = 'table' AND name = 'content_jobs' AND sql NOT LIKE '%''refused''%';
PRAGMA writable_schema = RESET;
