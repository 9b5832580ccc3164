-- An author's earliest due time (mine_versions.next_due_at) is kept exact, not a bound that only
-- moves earlier (0015): when the job that was earliest goes or is put off, the next is found by
-- content_jobs_user_due, read in order and the first taken (ORDER BY … LIMIT 1: SQLite's MIN()
-- reads every entry of the author's range, and an author may owe 100,000 jobs). With a bound
-- that had passed, every first view of an author whose jobs were put off (a budget run out, a
-- retry backing off) read their jobs a second time to find the next due time (issue 25).
-- PostgreSQL keeps the bound: there the search would be paid by every recording statement.
UPDATE mine_versions SET next_due_at = (SELECT MIN(due_at) FROM content_jobs j WHERE j.user_id = mine_versions.user_id)
WHERE next_due_at IS NOT NULL;
DROP TRIGGER content_jobs_version_delete;
CREATE TRIGGER content_jobs_version_delete AFTER DELETE ON content_jobs BEGIN
    UPDATE mine_versions SET version = version + 1, jobs = jobs - 1,
        next_due_at = CASE WHEN OLD.due_at > next_due_at THEN next_due_at
            ELSE (SELECT due_at FROM content_jobs j WHERE j.user_id = OLD.user_id ORDER BY due_at LIMIT 1) END
    WHERE user_id = OLD.user_id;
    UPDATE job_counts SET n = n - 1 WHERE task = OLD.task AND why = COALESCE(OLD.why, 'none');
END;

-- The author's version follows a raw change of a job's id too: an item's jobs are shown in id
-- order.
DROP TRIGGER content_jobs_version_update;
CREATE TRIGGER content_jobs_version_update AFTER UPDATE ON content_jobs
    WHEN OLD.id IS NOT NEW.id OR OLD.due_at IS NOT NEW.due_at OR OLD.attempts IS NOT NEW.attempts OR OLD.why IS NOT NEW.why
      OR OLD.user_id IS NOT NEW.user_id OR OLD.task IS NOT NEW.task OR OLD.kind IS NOT NEW.kind OR OLD.item_id IS NOT NEW.item_id BEGIN
    UPDATE mine_versions SET version = version + 1, jobs = jobs - 1,
        next_due_at = CASE WHEN OLD.due_at > next_due_at THEN next_due_at
            ELSE (SELECT due_at FROM content_jobs j WHERE j.user_id = OLD.user_id ORDER BY due_at LIMIT 1) END
    WHERE user_id = OLD.user_id;
    INSERT INTO mine_versions (user_id, version, jobs, next_due_at) VALUES (NEW.user_id, 1, 1, NEW.due_at)
    ON CONFLICT (user_id) DO UPDATE SET version = version + 1, jobs = jobs + 1,
        next_due_at = CASE WHEN next_due_at IS NULL OR excluded.next_due_at < next_due_at THEN excluded.next_due_at ELSE next_due_at END;
    UPDATE job_counts SET n = n - 1 WHERE task = OLD.task AND why = COALESCE(OLD.why, 'none');
    INSERT INTO job_counts (task, why, n) VALUES (NEW.task, COALESCE(NEW.why, 'none'), 1)
    ON CONFLICT (task, why) DO UPDATE SET n = n + 1;
END;
