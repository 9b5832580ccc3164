-- The author's view is read from the base tables, the same statements on both dialects (SQLite's
-- twin drops its kept rows and its exact earliest due time). The bound on an author's earliest
-- due time is raised by the runner after a sweep of the author (RaiseNextDue), without a new
-- version: a change of the bound notifies the author's waiters as a new version does, so that
-- streams and long polls on every replica wait for the new bound.
DROP TRIGGER mine_versions_notify_update ON mine_versions;
CREATE TRIGGER mine_versions_notify_update AFTER UPDATE ON mine_versions FOR EACH ROW
    WHEN (OLD.version IS DISTINCT FROM NEW.version OR OLD.next_due_at IS DISTINCT FROM NEW.next_due_at)
    EXECUTE FUNCTION owed_mine_versions_notify();
