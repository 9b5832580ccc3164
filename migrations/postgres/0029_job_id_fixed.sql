-- A job's id names it for as long as it is owed. The statement-level triggers that keep the
-- authors' versions and counts (0015, 0024) pair a job's rows before and after an update by
-- id, so a raw change of the id would leave them wrong; following it there would cost every
-- claim an anti-join over its transition tables. Nothing in owed changes an id, so such a
-- write is refused. UPDATE OF id fires only for statements that set id: a claim, a retry or a
-- park never reaches it.
CREATE FUNCTION owed_job_id_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'content_jobs.id cannot change (job %)', OLD.id USING ERRCODE = 'check_violation';
END
$$;
CREATE TRIGGER content_jobs_id_fixed BEFORE UPDATE OF id ON content_jobs FOR EACH ROW
    WHEN (NEW.id IS DISTINCT FROM OLD.id) EXECUTE FUNCTION owed_job_id_fixed();
