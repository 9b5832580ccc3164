-- Verdicts and scores settle their jobs once per statement (issue 25, the queue core).
--
-- Until now each recorded verdict (and score) ran its row's triggers: one DELETE of its job,
-- whose statement-level trigger (0015) then locked and updated the author's kept row and
-- appended a job_counts row, and one bump of the author's version. A batch of 128 verdicts
-- written in one statement cost 128 such statements and triggers, and as many new versions of
-- the same mine_versions rows, each walked by the next lookup. Now an INSERT into screens or
-- scores runs one statement-level trigger over its transition table: it locks the items'
-- authors' kept rows in author order (so concurrent batches, and the statement-level job
-- triggers of 0015, never deadlock), deletes the settled jobs in one statement (whose own
-- trigger counts them once), owes the allowed revisions' scores, refreshes the songs, and
-- bumps the authors' versions once. Every writer gets this, raw SQL included, so the kept
-- counts stay exact whoever records; updates and deletes of verdicts and scores keep their
-- row triggers (rare: overturns, item deletions).

-- Locks the kept rows of p_users (sorted) in author order, before anything else writes them.
--
-- These functions, and the jobs' statement-level triggers, find mine_versions rows by key only
-- (enable_seqscan off): the table holds a row per author but, after a bulk write, a dead
-- version of each row per change until vacuum; for a batch of a hundred authors the planner
-- chose to scan it whole (a scan that grows with every job written since the last vacuum:
-- 50,000 seeded jobs made a batch's lock cost 14 ms).
CREATE FUNCTION owed_lock_authors(p_users bigint[]) RETURNS void LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
    PERFORM 1 FROM mine_versions WHERE user_id = ANY(p_users) ORDER BY user_id FOR UPDATE;
END $$;

-- Bumps the versions of p_users (sorted, distinct) once in this transaction (see
-- owed_mine_bump).
CREATE FUNCTION owed_mine_bump_all(p_users bigint[]) RETURNS void LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
    INSERT INTO mine_versions AS v (user_id, version)
    SELECT u, 1 FROM unnest(p_users) AS u WHERE u IS NOT NULL ORDER BY u
    ON CONFLICT (user_id) DO UPDATE SET version = v.version + 1
    WHERE v.xmin::text::bigint <> txid_current() % 4294967296;
END $$;

CREATE FUNCTION owed_screens_settled() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    authors bigint[];
BEGIN
    SELECT array_agg(DISTINCT u ORDER BY u) INTO authors FROM (
        SELECT r.user_id AS u FROM n JOIN revisions r ON r.id = n.item_id WHERE n.kind = 'revision'
        UNION ALL SELECT c.user_id FROM n JOIN comments c ON c.id = n.item_id WHERE n.kind = 'comment'
        UNION ALL SELECT p.user_id FROM n JOIN pitches p ON p.id = n.item_id WHERE n.kind = 'pitch') a;
    PERFORM owed_lock_authors(authors);
    DELETE FROM content_jobs j USING n WHERE j.task = 'screen' AND j.kind = n.kind AND j.item_id = n.item_id;
    INSERT INTO content_jobs (task, kind, item_id, user_id, due_at)
    SELECT 'score', 'revision', r.id, r.user_id, n.screened_at
    FROM n JOIN revisions r ON r.id = n.item_id
    WHERE n.kind = 'revision' AND n.verdict = 'allow' AND NOT EXISTS (SELECT 1 FROM scores s WHERE s.revision_id = r.id)
    ORDER BY r.user_id, r.id
    ON CONFLICT (task, kind, item_id) DO NOTHING;
    PERFORM owed_refresh_song(x.song_id) FROM (
        SELECT DISTINCT r.song_id FROM n JOIN revisions r ON r.id = n.item_id WHERE n.kind = 'revision' ORDER BY 1) x;
    PERFORM owed_mine_bump_all(authors);
    RETURN NULL;
END $$;

CREATE FUNCTION owed_scores_settled() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    authors bigint[];
BEGIN
    SELECT array_agg(DISTINCT r.user_id ORDER BY r.user_id) INTO authors FROM n JOIN revisions r ON r.id = n.revision_id;
    PERFORM owed_lock_authors(authors);
    DELETE FROM content_jobs j USING n WHERE j.task = 'score' AND j.kind = 'revision' AND j.item_id = n.revision_id;
    PERFORM owed_refresh_song(x.song_id) FROM (SELECT DISTINCT n.song_id FROM n ORDER BY 1) x;
    PERFORM owed_mine_bump_all(authors);
    RETURN NULL;
END $$;

DROP TRIGGER screens_settle ON screens;
DROP TRIGGER screens_version ON screens;
CREATE TRIGGER screens_settle AFTER INSERT ON screens REFERENCING NEW TABLE AS n
    FOR EACH STATEMENT EXECUTE FUNCTION owed_screens_settled();
CREATE TRIGGER screens_version AFTER UPDATE OR DELETE ON screens FOR EACH ROW EXECUTE FUNCTION owed_version_screen();

DROP TRIGGER scores_settle ON scores;
DROP TRIGGER scores_version ON scores;
CREATE TRIGGER scores_settle AFTER INSERT ON scores REFERENCING NEW TABLE AS n
    FOR EACH STATEMENT EXECUTE FUNCTION owed_scores_settled();
CREATE TRIGGER scores_version AFTER UPDATE OR DELETE ON scores FOR EACH ROW EXECUTE FUNCTION owed_version_score();

DROP FUNCTION owed_screen_settled();
DROP FUNCTION owed_score_settled();

-- Deleted jobs notify their authors (0011) from the jobs' statement-level delete trigger,
-- once per author, instead of once per row: a batch of verdicts sent 128 identical-or-not
-- notifications that the transaction then folded together.
CREATE OR REPLACE FUNCTION owed_version_jobs_delete() RETURNS trigger LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
    PERFORM 1 FROM mine_versions WHERE user_id IN (SELECT user_id FROM o) ORDER BY user_id FOR UPDATE;
    UPDATE mine_versions v SET version = v.version + 1, jobs = v.jobs - d.n,
        next_due_at = CASE WHEN v.jobs = d.n THEN NULL ELSE v.next_due_at END
    FROM (SELECT user_id, COUNT(*) AS n FROM o GROUP BY user_id) d
    WHERE v.user_id = d.user_id;
    INSERT INTO job_counts (task, why, n) SELECT task, COALESCE(why, 'none'), -COUNT(*) FROM o GROUP BY 1, 2;
    PERFORM pg_notify('owed_mine', TG_TABLE_SCHEMA || ':' || d.user_id) FROM (SELECT DISTINCT user_id FROM o) d;
    RETURN NULL;
END $$;
DROP TRIGGER content_jobs_mine_notify ON content_jobs;
CREATE TRIGGER content_jobs_mine_notify AFTER INSERT ON content_jobs FOR EACH ROW EXECUTE FUNCTION owed_mine_notify();
ALTER FUNCTION owed_version_jobs_update() SET enable_seqscan = off;
