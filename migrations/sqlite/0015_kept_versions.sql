-- Kept versions and counts (issue 25): see migrations/postgres/0015_kept_versions.sql
-- (next_due_at is a bound: no later than the author's earliest due time). On
-- SQLite job_counts keeps one row per (task, why), updated in place (one writer: nobody waits).
CREATE TABLE mine_versions (
    user_id     INTEGER PRIMARY KEY, -- 0: what every author's view shares (the holds)
    version     INTEGER NOT NULL DEFAULT 0,
    jobs        INTEGER NOT NULL DEFAULT 0,
    next_due_at INTEGER
);

CREATE TABLE job_counts (
    task TEXT    NOT NULL,
    why  TEXT    NOT NULL,
    n    INTEGER NOT NULL,
    PRIMARY KEY (task, why)
);

INSERT INTO mine_versions (user_id, version, jobs, next_due_at)
SELECT user_id, 1, COUNT(*), MIN(due_at) FROM content_jobs GROUP BY user_id;
INSERT OR IGNORE INTO mine_versions (user_id, version) SELECT id, 1 FROM users;
INSERT OR IGNORE INTO mine_versions (user_id, version) VALUES (0, 1);
INSERT INTO job_counts (task, why, n) SELECT task, COALESCE(why, 'none'), COUNT(*) FROM content_jobs GROUP BY task, COALESCE(why, 'none');

CREATE TRIGGER revisions_version AFTER INSERT ON revisions BEGIN
    INSERT INTO mine_versions (user_id, version) VALUES (NEW.user_id, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER revisions_version_update AFTER UPDATE ON revisions BEGIN
    INSERT INTO mine_versions (user_id, version) VALUES (OLD.user_id, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
    INSERT INTO mine_versions (user_id, version) SELECT NEW.user_id, 1 WHERE NEW.user_id IS NOT OLD.user_id
        ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER revisions_version_delete AFTER DELETE ON revisions BEGIN
    INSERT INTO mine_versions (user_id, version) VALUES (OLD.user_id, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER comments_version AFTER INSERT ON comments BEGIN
    INSERT INTO mine_versions (user_id, version) VALUES (NEW.user_id, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER comments_version_update AFTER UPDATE ON comments BEGIN
    INSERT INTO mine_versions (user_id, version) VALUES (OLD.user_id, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
    INSERT INTO mine_versions (user_id, version) SELECT NEW.user_id, 1 WHERE NEW.user_id IS NOT OLD.user_id
        ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER comments_version_delete AFTER DELETE ON comments BEGIN
    INSERT INTO mine_versions (user_id, version) VALUES (OLD.user_id, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER pitches_version AFTER INSERT ON pitches BEGIN
    INSERT INTO mine_versions (user_id, version) VALUES (NEW.user_id, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER pitches_version_update AFTER UPDATE ON pitches BEGIN
    INSERT INTO mine_versions (user_id, version) VALUES (OLD.user_id, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
    INSERT INTO mine_versions (user_id, version) SELECT NEW.user_id, 1 WHERE NEW.user_id IS NOT OLD.user_id
        ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER pitches_version_delete AFTER DELETE ON pitches BEGIN
    INSERT INTO mine_versions (user_id, version) VALUES (OLD.user_id, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;

CREATE TRIGGER budgets_version AFTER INSERT ON budgets BEGIN
    INSERT INTO mine_versions (user_id, version) VALUES (NEW.user_id, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER budgets_version_update AFTER UPDATE ON budgets
    WHEN OLD.spent IS NOT NEW.spent OR OLD.day IS NOT NEW.day OR OLD.user_id IS NOT NEW.user_id BEGIN
    INSERT INTO mine_versions (user_id, version) VALUES (OLD.user_id, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
    INSERT INTO mine_versions (user_id, version) SELECT NEW.user_id, 1 WHERE NEW.user_id IS NOT OLD.user_id
        ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER budgets_version_delete AFTER DELETE ON budgets BEGIN
    INSERT INTO mine_versions (user_id, version) VALUES (OLD.user_id, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;

CREATE TRIGGER users_version AFTER UPDATE ON users WHEN OLD.daily_limit IS NOT NEW.daily_limit BEGIN
    INSERT INTO mine_versions (user_id, version) VALUES (NEW.id, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;

CREATE TRIGGER holds_version AFTER UPDATE ON holds WHEN OLD.screen IS NOT NEW.screen OR OLD.score IS NOT NEW.score BEGIN
    INSERT INTO mine_versions (user_id, version) VALUES (0, 1) ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;

CREATE TRIGGER screens_version AFTER INSERT ON screens BEGIN
    INSERT INTO mine_versions (user_id, version) SELECT u, 1 FROM (SELECT (CASE NEW.kind WHEN 'revision' THEN (SELECT user_id FROM revisions WHERE id = NEW.item_id)
        WHEN 'comment' THEN (SELECT user_id FROM comments WHERE id = NEW.item_id) WHEN 'pitch' THEN (SELECT user_id FROM pitches WHERE id = NEW.item_id) END) AS u) WHERE u IS NOT NULL
        ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER screens_version_update AFTER UPDATE ON screens BEGIN
    INSERT INTO mine_versions (user_id, version) SELECT u, 1 FROM (SELECT (CASE OLD.kind WHEN 'revision' THEN (SELECT user_id FROM revisions WHERE id = OLD.item_id)
        WHEN 'comment' THEN (SELECT user_id FROM comments WHERE id = OLD.item_id) WHEN 'pitch' THEN (SELECT user_id FROM pitches WHERE id = OLD.item_id) END) AS u) WHERE u IS NOT NULL
        ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
    INSERT INTO mine_versions (user_id, version) SELECT u, 1 FROM (SELECT (CASE NEW.kind WHEN 'revision' THEN (SELECT user_id FROM revisions WHERE id = NEW.item_id)
        WHEN 'comment' THEN (SELECT user_id FROM comments WHERE id = NEW.item_id) WHEN 'pitch' THEN (SELECT user_id FROM pitches WHERE id = NEW.item_id) END) AS u) WHERE u IS NOT NULL
        ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER screens_version_delete AFTER DELETE ON screens BEGIN
    INSERT INTO mine_versions (user_id, version) SELECT u, 1 FROM (SELECT (CASE OLD.kind WHEN 'revision' THEN (SELECT user_id FROM revisions WHERE id = OLD.item_id)
        WHEN 'comment' THEN (SELECT user_id FROM comments WHERE id = OLD.item_id) WHEN 'pitch' THEN (SELECT user_id FROM pitches WHERE id = OLD.item_id) END) AS u) WHERE u IS NOT NULL
        ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER scores_version AFTER INSERT ON scores BEGIN
    INSERT INTO mine_versions (user_id, version) SELECT u, 1 FROM (SELECT (SELECT user_id FROM revisions WHERE id = NEW.revision_id) AS u) WHERE u IS NOT NULL
        ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER scores_version_update AFTER UPDATE ON scores BEGIN
    INSERT INTO mine_versions (user_id, version) SELECT u, 1 FROM (SELECT (SELECT user_id FROM revisions WHERE id = OLD.revision_id) AS u) WHERE u IS NOT NULL
        ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
    INSERT INTO mine_versions (user_id, version) SELECT u, 1 FROM (SELECT (SELECT user_id FROM revisions WHERE id = NEW.revision_id) AS u) WHERE u IS NOT NULL
        ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER scores_version_delete AFTER DELETE ON scores BEGIN
    INSERT INTO mine_versions (user_id, version) SELECT u, 1 FROM (SELECT (SELECT user_id FROM revisions WHERE id = OLD.revision_id) AS u) WHERE u IS NOT NULL
        ON CONFLICT (user_id) DO UPDATE SET version = version + 1;
END;

-- Owed jobs: the author's version, number of jobs and earliest due time, and the counts.
CREATE TRIGGER content_jobs_version AFTER INSERT ON content_jobs BEGIN
    INSERT INTO mine_versions (user_id, version, jobs, next_due_at) VALUES (NEW.user_id, 1, 1, NEW.due_at)
    ON CONFLICT (user_id) DO UPDATE SET version = version + 1, jobs = jobs + 1,
        next_due_at = CASE WHEN next_due_at IS NULL OR excluded.next_due_at < next_due_at THEN excluded.next_due_at ELSE next_due_at END;
    INSERT INTO job_counts (task, why, n) VALUES (NEW.task, COALESCE(NEW.why, 'none'), 1)
    ON CONFLICT (task, why) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER content_jobs_version_delete AFTER DELETE ON content_jobs BEGIN
    UPDATE mine_versions SET version = version + 1, jobs = jobs - 1,
        next_due_at = CASE WHEN jobs = 1 THEN NULL ELSE next_due_at END
    WHERE user_id = OLD.user_id;
    UPDATE job_counts SET n = n - 1 WHERE task = OLD.task AND why = COALESCE(OLD.why, 'none');
END;
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
