-- Each item's row of the author's view (mine_rows, 0026) carries the item's owed jobs as the
-- view shows them, so a page of the view is one range of one table: the statement that read
-- the page's jobs from content_jobs was an eighth of a first view's time (issue 25).
--
-- jobs is NULL for an item that owes nothing, else one entry per job, separated by ',':
-- "id task due_at attempts why" (why empty when NULL). task and why are words of the CHECKs
-- on content_jobs, and the numbers integers, so neither separator occurs inside an entry;
-- models.parseRowJobs reads it and puts the jobs in id order (group_concat's order is
-- SQLite's choice: its ORDER BY argument is 3.44's, and the sqlite3 of an operator's machine
-- may be older; an item owes at most two jobs, by the unique (task, kind, item_id)). Only a
-- job of the item's author is the item's (as the page's jobs were read: by author).
ALTER TABLE mine_rows ADD COLUMN jobs TEXT;

-- mine_job_entries are the owed jobs' entries in the jobs column; an item's jobs are
-- (SELECT group_concat(entry, ',') FROM mine_job_entries WHERE kind = … AND item_id = … AND
-- user_id = …), which SQLite reads by content_jobs' unique (task, kind, item_id) index.
CREATE VIEW mine_job_entries (kind, item_id, user_id, entry) AS
    SELECT kind, item_id, user_id, id || ' ' || task || ' ' || due_at || ' ' || attempts || ' ' || COALESCE(why, '')
    FROM content_jobs WHERE task IN ('screen', 'score');

UPDATE mine_rows SET jobs = j.jobs
FROM (SELECT kind, item_id, user_id, group_concat(entry, ',') AS jobs FROM mine_job_entries GROUP BY kind, item_id, user_id) j
    JOIN mine_items i ON i.kind = j.kind AND i.item_id = j.item_id AND i.user_id = j.user_id
WHERE mine_rows.user_id = i.user_id AND mine_rows.created_at = i.created_at AND mine_rows.kind_order = i.kind_order
    AND mine_rows.id = i.item_id;

-- Owed jobs: a job's insert, delete, or change of anything the view shows or of its item sets
-- its item's jobs afresh (its old item's too, when it moved). A claim sets only the lease, which
-- the view does not show, and passes the update's WHEN.
CREATE TRIGGER content_jobs_mine_row AFTER INSERT ON content_jobs BEGIN
    UPDATE mine_rows SET jobs = (SELECT group_concat(entry, ',') FROM mine_job_entries e
            WHERE e.kind = NEW.kind AND e.item_id = NEW.item_id AND e.user_id = NEW.user_id)
    WHERE user_id = NEW.user_id AND kind_order = CASE NEW.kind WHEN 'revision' THEN 2 WHEN 'comment' THEN 1 ELSE 0 END
        AND id = NEW.item_id AND created_at = (SELECT created_at FROM mine_items i
            WHERE i.kind = NEW.kind AND i.item_id = NEW.item_id AND i.user_id = NEW.user_id);
END;
CREATE TRIGGER content_jobs_mine_row_delete AFTER DELETE ON content_jobs BEGIN
    UPDATE mine_rows SET jobs = (SELECT group_concat(entry, ',') FROM mine_job_entries e
            WHERE e.kind = OLD.kind AND e.item_id = OLD.item_id AND e.user_id = OLD.user_id)
    WHERE user_id = OLD.user_id AND kind_order = CASE OLD.kind WHEN 'revision' THEN 2 WHEN 'comment' THEN 1 ELSE 0 END
        AND id = OLD.item_id AND created_at = (SELECT created_at FROM mine_items i
            WHERE i.kind = OLD.kind AND i.item_id = OLD.item_id AND i.user_id = OLD.user_id);
END;
CREATE TRIGGER content_jobs_mine_row_update AFTER UPDATE ON content_jobs
    WHEN OLD.id IS NOT NEW.id OR OLD.due_at IS NOT NEW.due_at OR OLD.attempts IS NOT NEW.attempts OR OLD.why IS NOT NEW.why
      OR OLD.user_id IS NOT NEW.user_id OR OLD.task IS NOT NEW.task OR OLD.kind IS NOT NEW.kind OR OLD.item_id IS NOT NEW.item_id BEGIN
    UPDATE mine_rows SET jobs = (SELECT group_concat(entry, ',') FROM mine_job_entries e
            WHERE e.kind = NEW.kind AND e.item_id = NEW.item_id AND e.user_id = NEW.user_id)
    WHERE user_id = NEW.user_id AND kind_order = CASE NEW.kind WHEN 'revision' THEN 2 WHEN 'comment' THEN 1 ELSE 0 END
        AND id = NEW.item_id AND created_at = (SELECT created_at FROM mine_items i
            WHERE i.kind = NEW.kind AND i.item_id = NEW.item_id AND i.user_id = NEW.user_id);
    UPDATE mine_rows SET jobs = (SELECT group_concat(entry, ',') FROM mine_job_entries e
            WHERE e.kind = OLD.kind AND e.item_id = OLD.item_id AND e.user_id = OLD.user_id)
    WHERE user_id = OLD.user_id AND kind_order = CASE OLD.kind WHEN 'revision' THEN 2 WHEN 'comment' THEN 1 ELSE 0 END
        AND id = OLD.item_id AND created_at = (SELECT created_at FROM mine_items i
            WHERE i.kind = OLD.kind AND i.item_id = OLD.item_id AND i.user_id = OLD.user_id)
        AND (OLD.kind IS NOT NEW.kind OR OLD.item_id IS NOT NEW.item_id OR OLD.user_id IS NOT NEW.user_id);
END;

-- The author's earliest due time is kept exact, not a bound that only moves earlier (0015): when
-- the job that was earliest goes or is put off, the next is found by content_jobs_user_due (one
-- seek: ORDER BY … LIMIT 1, since SQLite's MIN() reads every entry of the author's range, and
-- an author may owe 100,000 jobs). With a bound that had passed, every view of an author whose jobs were put off (a budget
-- run out, a retry backing off) read their jobs a second time to find the next due time.
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

-- The author's version follows a raw change of a job's id too: an item's jobs are in id order.
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

-- Items: a row the item triggers of 0026 insert (a new item, or one whose key moved) takes the
-- jobs already owed for it, whichever of the item's triggers runs first.
DROP TRIGGER revisions_mine_row;
DROP TRIGGER revisions_mine_row_update;
DROP TRIGGER comments_mine_row;
DROP TRIGGER comments_mine_row_update;
DROP TRIGGER pitches_mine_row;
DROP TRIGGER pitches_mine_row_update;
CREATE TRIGGER revisions_mine_row AFTER INSERT ON revisions BEGIN
    INSERT INTO mine_rows
    SELECT NEW.user_id, NEW.created_at, 2, NEW.id, NEW.song_id, NEW.title, s.verdict, s.confidence, sc.art, sc.art_runs, sc.criteria, sc.model, sc.rubric,
        (SELECT group_concat(entry, ',') FROM mine_job_entries e WHERE e.kind = 'revision' AND e.item_id = NEW.id AND e.user_id = NEW.user_id)
    FROM (SELECT 1) LEFT JOIN screens s ON s.kind = 'revision' AND s.item_id = NEW.id LEFT JOIN scores sc ON sc.revision_id = NEW.id;
END;
CREATE TRIGGER revisions_mine_row_update AFTER UPDATE ON revisions
    WHEN OLD.id IS NOT NEW.id OR OLD.user_id IS NOT NEW.user_id OR OLD.created_at IS NOT NEW.created_at
        OR OLD.song_id IS NOT NEW.song_id OR OLD.title IS NOT NEW.title BEGIN
    DELETE FROM mine_rows WHERE user_id = OLD.user_id AND created_at = OLD.created_at AND kind_order = 2 AND id = OLD.id;
    INSERT INTO mine_rows
    SELECT NEW.user_id, NEW.created_at, 2, NEW.id, NEW.song_id, NEW.title, s.verdict, s.confidence, sc.art, sc.art_runs, sc.criteria, sc.model, sc.rubric,
        (SELECT group_concat(entry, ',') FROM mine_job_entries e WHERE e.kind = 'revision' AND e.item_id = NEW.id AND e.user_id = NEW.user_id)
    FROM (SELECT 1) LEFT JOIN screens s ON s.kind = 'revision' AND s.item_id = NEW.id LEFT JOIN scores sc ON sc.revision_id = NEW.id;
END;
CREATE TRIGGER comments_mine_row AFTER INSERT ON comments BEGIN
    INSERT INTO mine_rows (user_id, created_at, kind_order, id, song_id, verdict, confidence, jobs)
    SELECT NEW.user_id, NEW.created_at, 1, NEW.id, NEW.song_id, s.verdict, s.confidence,
        (SELECT group_concat(entry, ',') FROM mine_job_entries e WHERE e.kind = 'comment' AND e.item_id = NEW.id AND e.user_id = NEW.user_id)
    FROM (SELECT 1) LEFT JOIN screens s ON s.kind = 'comment' AND s.item_id = NEW.id;
END;
CREATE TRIGGER comments_mine_row_update AFTER UPDATE ON comments
    WHEN OLD.id IS NOT NEW.id OR OLD.user_id IS NOT NEW.user_id OR OLD.created_at IS NOT NEW.created_at
        OR OLD.song_id IS NOT NEW.song_id BEGIN
    DELETE FROM mine_rows WHERE user_id = OLD.user_id AND created_at = OLD.created_at AND kind_order = 1 AND id = OLD.id;
    INSERT INTO mine_rows (user_id, created_at, kind_order, id, song_id, verdict, confidence, jobs)
    SELECT NEW.user_id, NEW.created_at, 1, NEW.id, NEW.song_id, s.verdict, s.confidence,
        (SELECT group_concat(entry, ',') FROM mine_job_entries e WHERE e.kind = 'comment' AND e.item_id = NEW.id AND e.user_id = NEW.user_id)
    FROM (SELECT 1) LEFT JOIN screens s ON s.kind = 'comment' AND s.item_id = NEW.id;
END;
CREATE TRIGGER pitches_mine_row AFTER INSERT ON pitches BEGIN
    INSERT INTO mine_rows (user_id, created_at, kind_order, id, verdict, confidence, jobs)
    SELECT NEW.user_id, NEW.created_at, 0, NEW.id, s.verdict, s.confidence,
        (SELECT group_concat(entry, ',') FROM mine_job_entries e WHERE e.kind = 'pitch' AND e.item_id = NEW.id AND e.user_id = NEW.user_id)
    FROM (SELECT 1) LEFT JOIN screens s ON s.kind = 'pitch' AND s.item_id = NEW.id;
END;
CREATE TRIGGER pitches_mine_row_update AFTER UPDATE ON pitches
    WHEN OLD.id IS NOT NEW.id OR OLD.user_id IS NOT NEW.user_id OR OLD.created_at IS NOT NEW.created_at BEGIN
    DELETE FROM mine_rows WHERE user_id = OLD.user_id AND created_at = OLD.created_at AND kind_order = 0 AND id = OLD.id;
    INSERT INTO mine_rows (user_id, created_at, kind_order, id, verdict, confidence, jobs)
    SELECT NEW.user_id, NEW.created_at, 0, NEW.id, s.verdict, s.confidence,
        (SELECT group_concat(entry, ',') FROM mine_job_entries e WHERE e.kind = 'pitch' AND e.item_id = NEW.id AND e.user_id = NEW.user_id)
    FROM (SELECT 1) LEFT JOIN screens s ON s.kind = 'pitch' AND s.item_id = NEW.id;
END;
