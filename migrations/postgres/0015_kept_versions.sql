-- Kept versions and counts (issue 25). What an author's own view (GET /api/listeners/mine)
-- shows changes only through the rows below, and a trigger on each of them bumps the author's
-- row of mine_versions in the same transaction: items (new, changed, deleted), owed jobs
-- (owed, settled, rescheduled, retried), verdicts, scores, budget charges and the admin's
-- daily limit. Row 0 is what every view shares: the holds. So the view's version is one row
-- read by key, whatever the author's backlog, and raw SQL bumps it like the store does.
--
-- mine_versions also keeps the author's number of owed jobs and their earliest due time
-- (read by content_jobs_user_due when the earliest one goes), so the view knows when to wake
-- the author's jobs without reading them.
--
-- job_counts keeps the owed jobs per (task, why) ('none' for no why) for /metrics and the
-- admin's overview and job list: one row is appended per change (+1 / -1), never updated, so
-- concurrent writers never wait on a shared counter; a read sums the rows, and the store folds
-- them into one row per (task, why) when they grow (models.compactJobCounts).
CREATE TABLE mine_versions (
    user_id     bigint PRIMARY KEY, -- 0: what every author's view shares (the holds)
    version     bigint NOT NULL DEFAULT 0,
    jobs        bigint NOT NULL DEFAULT 0,
    next_due_at bigint
);

CREATE TABLE job_counts (
    task text   NOT NULL,
    why  text   NOT NULL,
    n    bigint NOT NULL
);

INSERT INTO mine_versions (user_id, version, jobs, next_due_at)
SELECT user_id, 1, COUNT(*), MIN(due_at) FROM content_jobs GROUP BY user_id;
INSERT INTO mine_versions (user_id, version) SELECT id, 1 FROM users ON CONFLICT (user_id) DO NOTHING;
INSERT INTO mine_versions (user_id, version) VALUES (0, 1) ON CONFLICT (user_id) DO NOTHING;
INSERT INTO job_counts (task, why, n) SELECT task, COALESCE(why, 'none'), COUNT(*) FROM content_jobs GROUP BY task, COALESCE(why, 'none');

-- A row that this transaction has written already has a new version (every write bumps it),
-- so it is not written again: PostgreSQL keeps every version a transaction writes of one row
-- until it ends, and finding the row costs a step per version (a statement writing a thousand
-- items of one author would cost a million steps).
CREATE FUNCTION owed_mine_bump(p_user bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- plpgsql, not sql: its statements are planned once per session, not at every call.
    IF p_user IS NOT NULL THEN
        INSERT INTO mine_versions AS v (user_id, version) VALUES (p_user, 1)
        ON CONFLICT (user_id) DO UPDATE SET version = v.version + 1
        WHERE v.xmin::text::bigint <> txid_current() % 4294967296;
    END IF;
END $$;

-- The author of an item (NULL once it is gone: its own deletion bumped them).
CREATE FUNCTION owed_item_author(p_kind text, p_id bigint) RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_kind = 'revision' THEN
        RETURN (SELECT user_id FROM revisions WHERE id = p_id);
    ELSIF p_kind = 'comment' THEN
        RETURN (SELECT user_id FROM comments WHERE id = p_id);
    ELSIF p_kind = 'pitch' THEN
        RETURN (SELECT user_id FROM pitches WHERE id = p_id);
    END IF;
    RETURN NULL;
END $$;

-- Rows with a user_id: items and budgets.
CREATE FUNCTION owed_version_user_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM owed_mine_bump(OLD.user_id);
    END IF;
    IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR OLD.user_id IS DISTINCT FROM NEW.user_id) THEN
        PERFORM owed_mine_bump(NEW.user_id);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER revisions_version AFTER INSERT OR UPDATE OR DELETE ON revisions FOR EACH ROW EXECUTE FUNCTION owed_version_user_row();
CREATE TRIGGER comments_version AFTER INSERT OR UPDATE OR DELETE ON comments FOR EACH ROW EXECUTE FUNCTION owed_version_user_row();
CREATE TRIGGER pitches_version AFTER INSERT OR UPDATE OR DELETE ON pitches FOR EACH ROW EXECUTE FUNCTION owed_version_user_row();
CREATE TRIGGER budgets_version AFTER INSERT OR DELETE ON budgets FOR EACH ROW EXECUTE FUNCTION owed_version_user_row();
CREATE TRIGGER budgets_version_update AFTER UPDATE ON budgets FOR EACH ROW
    WHEN (OLD.spent IS DISTINCT FROM NEW.spent OR OLD.day IS DISTINCT FROM NEW.day OR OLD.user_id IS DISTINCT FROM NEW.user_id)
    EXECUTE FUNCTION owed_version_user_row();

CREATE FUNCTION owed_version_user() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM owed_mine_bump(NEW.id);
    RETURN NULL;
END $$;
CREATE TRIGGER users_version AFTER UPDATE ON users FOR EACH ROW
    WHEN (OLD.daily_limit IS DISTINCT FROM NEW.daily_limit) EXECUTE FUNCTION owed_version_user();

CREATE FUNCTION owed_version_holds() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM owed_mine_bump(0);
    RETURN NULL;
END $$;
CREATE TRIGGER holds_version AFTER UPDATE ON holds FOR EACH ROW
    WHEN (OLD.screen IS DISTINCT FROM NEW.screen OR OLD.score IS DISTINCT FROM NEW.score)
    EXECUTE FUNCTION owed_version_holds();

CREATE FUNCTION owed_version_screen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM owed_mine_bump(owed_item_author(OLD.kind, OLD.item_id));
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM owed_mine_bump(owed_item_author(NEW.kind, NEW.item_id));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER screens_version AFTER INSERT OR UPDATE OR DELETE ON screens FOR EACH ROW EXECUTE FUNCTION owed_version_screen();

CREATE FUNCTION owed_version_score() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM owed_mine_bump(owed_item_author('revision', OLD.revision_id));
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM owed_mine_bump(owed_item_author('revision', NEW.revision_id));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER scores_version AFTER INSERT OR UPDATE OR DELETE ON scores FOR EACH ROW EXECUTE FUNCTION owed_version_score();

-- Owed jobs: the author's version and number of jobs, a bound on their earliest due time
-- (next_due_at: no later than the earliest, lowered as jobs come, never searched for as they
-- go, which would walk the index over every job deleted since the last vacuum; the store
-- looks further only when the bound has passed), and the counts.
--
-- An insert updates its author's row at once. Deletes and updates run once per statement,
-- over their transition tables, and lock the authors' rows in author order, so that statements
-- changing many authors' jobs (putting every due job off, a retry, a bulk delete) never
-- deadlock on them; a claim changes only leases and leaves at the first check.
CREATE FUNCTION owed_version_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE mine_versions SET version = version + 1, jobs = jobs - 1,
            next_due_at = CASE WHEN jobs = 1 THEN NULL ELSE next_due_at END
        WHERE user_id = OLD.user_id;
        INSERT INTO job_counts (task, why, n) VALUES (OLD.task, COALESCE(OLD.why, 'none'), -1);
    ELSE
        INSERT INTO mine_versions AS v (user_id, version, jobs, next_due_at) VALUES (NEW.user_id, 1, 1, NEW.due_at)
        ON CONFLICT (user_id) DO UPDATE SET version = v.version + 1, jobs = v.jobs + 1,
            next_due_at = LEAST(v.next_due_at, EXCLUDED.next_due_at);
        INSERT INTO job_counts (task, why, n) VALUES (NEW.task, COALESCE(NEW.why, 'none'), 1);
    END IF;
    RETURN NULL;
END $$;

-- An update changes the view when it changes what the view shows of a job (a claim changes
-- only its lease): each such row counts as its old row gone and its new row come.
CREATE FUNCTION owed_version_jobs_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM o JOIN n ON n.id = o.id WHERE o.due_at IS DISTINCT FROM n.due_at OR o.attempts IS DISTINCT FROM n.attempts
           OR o.why IS DISTINCT FROM n.why OR o.user_id IS DISTINCT FROM n.user_id
           OR o.task IS DISTINCT FROM n.task OR o.kind IS DISTINCT FROM n.kind OR o.item_id IS DISTINCT FROM n.item_id) THEN
        RETURN NULL;
    END IF;
    PERFORM 1 FROM mine_versions WHERE user_id IN (SELECT o.user_id FROM o UNION SELECT n.user_id FROM n)
        ORDER BY user_id FOR UPDATE;
    WITH c AS (SELECT o.user_id AS old_user, n.user_id AS new_user, o.task AS old_task, COALESCE(o.why, 'none') AS old_why,
            n.task AS new_task, COALESCE(n.why, 'none') AS new_why, n.due_at AS new_due
        FROM o JOIN n ON n.id = o.id
        WHERE o.due_at IS DISTINCT FROM n.due_at OR o.attempts IS DISTINCT FROM n.attempts
           OR o.why IS DISTINCT FROM n.why OR o.user_id IS DISTINCT FROM n.user_id
           OR o.task IS DISTINCT FROM n.task OR o.kind IS DISTINCT FROM n.kind OR o.item_id IS DISTINCT FROM n.item_id),
    counts AS (INSERT INTO job_counts (task, why, n)
        SELECT task, why, SUM(d) FROM (
            SELECT old_task AS task, old_why AS why, -1 AS d FROM c WHERE old_task <> new_task OR old_why <> new_why
            UNION ALL
            SELECT new_task, new_why, 1 FROM c WHERE old_task <> new_task OR old_why <> new_why) x
        GROUP BY task, why HAVING SUM(d) <> 0)
    INSERT INTO mine_versions AS v (user_id, version, jobs, next_due_at)
    SELECT u, 1, SUM(d), MIN(due)
    FROM (SELECT old_user AS u, -1 AS d, NULL::bigint AS due FROM c UNION ALL SELECT new_user, 1, new_due FROM c) x
    GROUP BY u ORDER BY u
    ON CONFLICT (user_id) DO UPDATE SET version = v.version + 1, jobs = v.jobs + EXCLUDED.jobs,
        next_due_at = CASE WHEN v.jobs + EXCLUDED.jobs = 0 THEN NULL ELSE LEAST(v.next_due_at, EXCLUDED.next_due_at) END;
    RETURN NULL;
END $$;

CREATE FUNCTION owed_version_jobs_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM mine_versions WHERE user_id IN (SELECT user_id FROM o) ORDER BY user_id FOR UPDATE;
    UPDATE mine_versions v SET version = v.version + 1, jobs = v.jobs - d.n,
        next_due_at = CASE WHEN v.jobs = d.n THEN NULL ELSE v.next_due_at END
    FROM (SELECT user_id, COUNT(*) AS n FROM o GROUP BY user_id) d
    WHERE v.user_id = d.user_id;
    INSERT INTO job_counts (task, why, n) SELECT task, COALESCE(why, 'none'), -COUNT(*) FROM o GROUP BY 1, 2;
    RETURN NULL;
END $$;

CREATE TRIGGER content_jobs_version AFTER INSERT ON content_jobs FOR EACH ROW EXECUTE FUNCTION owed_version_job();
CREATE TRIGGER content_jobs_version_delete AFTER DELETE ON content_jobs REFERENCING OLD TABLE AS o
    FOR EACH STATEMENT EXECUTE FUNCTION owed_version_jobs_delete();
CREATE TRIGGER content_jobs_version_update AFTER UPDATE ON content_jobs REFERENCING OLD TABLE AS o NEW TABLE AS n
    FOR EACH STATEMENT EXECUTE FUNCTION owed_version_jobs_update();
