-- The author's view is read from the base tables, the same statements on both dialects: its
-- kept rows (mine_rows, 0026) go, and the verdict has its covering index again beside its key
-- (0021), so a page's verdicts are read from an index alone. The author's earliest due time is
-- a bound again, the same as PostgreSQL's: lowered as jobs come or are put off, NULL when the
-- author owes nothing, raised by the runner after a sweep of the author (RaiseNextDue) rather
-- than searched for by every delete (0028).
DROP TRIGGER revisions_mine_row;
DROP TRIGGER revisions_mine_row_update;
DROP TRIGGER revisions_mine_row_delete;
DROP TRIGGER comments_mine_row;
DROP TRIGGER comments_mine_row_update;
DROP TRIGGER comments_mine_row_delete;
DROP TRIGGER pitches_mine_row;
DROP TRIGGER pitches_mine_row_update;
DROP TRIGGER pitches_mine_row_delete;
DROP TRIGGER screens_mine_row;
DROP TRIGGER screens_mine_row_update;
DROP TRIGGER screens_mine_row_delete;
DROP TRIGGER scores_mine_row;
DROP TRIGGER scores_mine_row_update;
DROP TRIGGER scores_mine_row_delete;
DROP VIEW mine_items;
DROP TABLE mine_rows;
CREATE INDEX screens_verdict ON screens (kind, item_id, verdict, confidence);

DROP TRIGGER content_jobs_version_delete;
CREATE TRIGGER content_jobs_version_delete AFTER DELETE ON content_jobs BEGIN
    UPDATE mine_versions SET version = version + 1, jobs = jobs - 1,
        next_due_at = CASE WHEN jobs = 1 THEN NULL ELSE next_due_at END
    WHERE user_id = OLD.user_id;
    UPDATE job_counts SET n = n - 1 WHERE task = OLD.task AND why = COALESCE(OLD.why, 'none');
END;
DROP TRIGGER content_jobs_version_update;
CREATE TRIGGER content_jobs_version_update AFTER UPDATE ON content_jobs
    WHEN OLD.due_at IS NOT NEW.due_at OR OLD.attempts IS NOT NEW.attempts OR OLD.why IS NOT NEW.why
      OR OLD.user_id IS NOT NEW.user_id OR OLD.task IS NOT NEW.task OR OLD.kind IS NOT NEW.kind OR OLD.item_id IS NOT NEW.item_id BEGIN
    UPDATE mine_versions SET version = version + 1, jobs = jobs - 1,
        next_due_at = CASE WHEN jobs = 1 THEN NULL ELSE next_due_at END
    WHERE user_id = OLD.user_id;
    INSERT INTO mine_versions (user_id, version, jobs, next_due_at) VALUES (NEW.user_id, 1, 1, NEW.due_at)
    ON CONFLICT (user_id) DO UPDATE SET version = version + 1, jobs = jobs + 1,
        next_due_at = CASE WHEN next_due_at IS NULL OR excluded.next_due_at < next_due_at THEN excluded.next_due_at ELSE next_due_at END;
    UPDATE job_counts SET n = n - 1 WHERE task = OLD.task AND why = COALESCE(OLD.why, 'none');
    INSERT INTO job_counts (task, why, n) VALUES (NEW.task, COALESCE(NEW.why, 'none'), 1)
    ON CONFLICT (task, why) DO UPDATE SET n = n + 1;
END;
