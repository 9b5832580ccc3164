-- A job's id names it for as long as it is owed, and a change of it is refused, as on
-- PostgreSQL (where the kept versions and counts cannot follow one cheaply; see its 0029), so
-- that a raw write means the same on both. UPDATE OF id fires only for statements that set id.
-- 0028's content_jobs_version_update still lists the id among what it follows; with this
-- trigger refusing the write first, that clause is never reached.
CREATE TRIGGER content_jobs_id_fixed BEFORE UPDATE OF id ON content_jobs
WHEN NEW.id IS NOT OLD.id
BEGIN
    SELECT RAISE(ABORT, 'content_jobs.id cannot change');
END;
