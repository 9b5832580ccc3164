-- One completion path for a job (issue 29): every run ends in an attempt, a release or a
-- put-off. Two whys are stored now: 'refused' (a request the model client refuses before
-- sending, or a task this process does not run: an attempt with the backoff instead of a job
-- that comes back every lease period unseen) and 'unavailable' (the database failed while the
-- job ran: an attempt with the backoff instead of a lease left to run out). The CHECK on
-- content_jobs.why gains both: the check as it stands plus the two values.
DO $$
DECLARE def text;
BEGIN
    SELECT pg_get_constraintdef(c.oid) INTO def FROM pg_constraint c
    WHERE c.conrelid = 'content_jobs'::regclass AND c.conname = 'content_jobs_why_check';
    IF def IS NULL OR position('''refused''' IN def) > 0 THEN
        RETURN;
    END IF;
    IF position('''review''::text' IN def) = 0 THEN
        RAISE EXCEPTION 'content_jobs_why_check is not as expected: %', def;
    END IF;
    ALTER TABLE content_jobs DROP CONSTRAINT content_jobs_why_check;
    EXECUTE 'ALTER TABLE content_jobs ADD CONSTRAINT content_jobs_why_check '
        || replace(def, '''review''::text', '''review''::text, ''unavailable''::text, ''refused''::text');
END $$;
