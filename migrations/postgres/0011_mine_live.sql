-- Live `mine` (issue 15). Every change to what an author's own view shows notifies channel
-- owed_mine with '<schema>:<author id>', so waiting long polls and streams on every replica
-- wake (package notify LISTENs). Triggers, not the writers, send it, so raw SQL wakes waiters
-- too. NOTIFY is delivered at commit, and not at all on rollback; one transaction's identical
-- payloads are delivered once.
CREATE FUNCTION owed_mine_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('owed_mine', TG_TABLE_SCHEMA || ':' || OLD.user_id);
    ELSE
        PERFORM pg_notify('owed_mine', TG_TABLE_SCHEMA || ':' || NEW.user_id);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION owed_mine_notify_user() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('owed_mine', TG_TABLE_SCHEMA || ':' || NEW.id);
    RETURN NULL;
END $$;

-- Items: new and deleted (items are never updated in place).
CREATE TRIGGER revisions_mine_notify AFTER INSERT OR DELETE ON revisions FOR EACH ROW EXECUTE FUNCTION owed_mine_notify();
CREATE TRIGGER comments_mine_notify AFTER INSERT OR DELETE ON comments FOR EACH ROW EXECUTE FUNCTION owed_mine_notify();
CREATE TRIGGER pitches_mine_notify AFTER INSERT OR DELETE ON pitches FOR EACH ROW EXECUTE FUNCTION owed_mine_notify();

-- Owed jobs: owed, settled (every verdict and score deletes its job), rescheduled, retried.
-- A claim changes only the lease, which the view does not show: no notification.
CREATE TRIGGER content_jobs_mine_notify AFTER INSERT OR DELETE ON content_jobs FOR EACH ROW EXECUTE FUNCTION owed_mine_notify();
CREATE TRIGGER content_jobs_mine_notify_update AFTER UPDATE ON content_jobs FOR EACH ROW
    WHEN (OLD.due_at IS DISTINCT FROM NEW.due_at OR OLD.attempts IS DISTINCT FROM NEW.attempts
          OR OLD.why IS DISTINCT FROM NEW.why OR OLD.user_id IS DISTINCT FROM NEW.user_id)
    EXECUTE FUNCTION owed_mine_notify();

-- The budget: charges (today's spend) and the admin's daily limit.
CREATE TRIGGER budgets_mine_notify AFTER INSERT ON budgets FOR EACH ROW EXECUTE FUNCTION owed_mine_notify();
CREATE TRIGGER budgets_mine_notify_update AFTER UPDATE ON budgets FOR EACH ROW
    WHEN (OLD.spent IS DISTINCT FROM NEW.spent) EXECUTE FUNCTION owed_mine_notify();
CREATE TRIGGER users_mine_notify AFTER UPDATE ON users FOR EACH ROW
    WHEN (OLD.daily_limit IS DISTINCT FROM NEW.daily_limit) EXECUTE FUNCTION owed_mine_notify_user();

-- Paging `mine` newest first across kinds reads each kind by (author, created_at, id).
CREATE INDEX revisions_user_created ON revisions (user_id, created_at, id);
CREATE INDEX comments_user_created ON comments (user_id, created_at, id);
CREATE INDEX pitches_user_created ON pitches (user_id, created_at, id);
