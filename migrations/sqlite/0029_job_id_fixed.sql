-- A job's id names it for as long as it is owed, and a change of it is refused, as on
-- PostgreSQL (where the kept versions and counts cannot follow one cheaply; see its 0029), so
-- that a raw write means the same on both. UPDATE OF id fires only for statements that set id.
CREATE TRIGGER content_jobs_id_fixed BEFORE UPDATE OF id ON content_jobs
WHEN NEW.id IS NOT OLD.id
BEGIN
    SELECT RAISE(ABORT, 'content_jobs.id cannot change');
END;
