-- The author's view (`mine`, issue 25) from one clustered range. An author's items lie scattered
-- through their tables, and so do their verdicts and scores (their keys are the items' ids,
-- which every author shares), so a page of 100 items cost a random visit per item to screens'
-- index and per revision to scores: most of a 200's time at a million items. mine_rows keeps
-- each item's row of the view — its place in the order, song, title, verdict and score — keyed by
-- author first, without a rowid, so an author's page is a few adjacent pages of one b-tree.
--
-- The key is the view's order read backwards: created_at, then kind_order (revision 2, comment
-- 1, pitch 0: the view shows revisions first among equal times), then id. The triggers below
-- keep it equal to the tables in the transaction of every change, by the store or by raw SQL;
-- TestKeptVersionsAndCounts compares it with a fresh join after every step.
--
-- SQLite only: on PostgreSQL every write the record path adds is paid by the queue core, its
-- bottleneck, and its view reads its rows from shared buffers (the twin changes nothing).
CREATE TABLE mine_rows (
    user_id    INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    kind_order INTEGER NOT NULL,
    id         INTEGER NOT NULL,
    song_id    INTEGER,
    title      TEXT,
    verdict    TEXT,
    confidence REAL,
    art        REAL,
    art_runs   TEXT,
    criteria   TEXT,
    model      TEXT,
    rubric     TEXT,
    PRIMARY KEY (user_id, created_at, kind_order, id)
) WITHOUT ROWID;

INSERT INTO mine_rows
SELECT r.user_id, r.created_at, 2, r.id, r.song_id, r.title, s.verdict, s.confidence, sc.art, sc.art_runs, sc.criteria, sc.model, sc.rubric
FROM revisions r LEFT JOIN screens s ON s.kind = 'revision' AND s.item_id = r.id LEFT JOIN scores sc ON sc.revision_id = r.id;
INSERT INTO mine_rows (user_id, created_at, kind_order, id, song_id, verdict, confidence)
SELECT c.user_id, c.created_at, 1, c.id, c.song_id, s.verdict, s.confidence
FROM comments c LEFT JOIN screens s ON s.kind = 'comment' AND s.item_id = c.id;
INSERT INTO mine_rows (user_id, created_at, kind_order, id, verdict, confidence)
SELECT p.user_id, p.created_at, 0, p.id, s.verdict, s.confidence
FROM pitches p LEFT JOIN screens s ON s.kind = 'pitch' AND s.item_id = p.id;

-- Only the view read screens_verdict (0021); its rows are here now, and the index was a write
-- on every verdict.
DROP INDEX screens_verdict;

-- Items: an insert adds the item's row (with a verdict or score already there, which raw SQL can
-- leave behind), a delete removes it, and an update of anything in the row or its key moves it.
-- The updates' triggers test the values, not `UPDATE OF` a column list: SQLite decides the
-- latter by the names in the SET list, and `SET rowid = …` changes id under another name. An
-- `INSERT OR REPLACE` deletes the row it replaces through the delete triggers only with
-- recursive_triggers on, which owed's connections set (models/dialect_sqlite.go).
CREATE TRIGGER revisions_mine_row AFTER INSERT ON revisions BEGIN
    INSERT INTO mine_rows
    SELECT NEW.user_id, NEW.created_at, 2, NEW.id, NEW.song_id, NEW.title, s.verdict, s.confidence, sc.art, sc.art_runs, sc.criteria, sc.model, sc.rubric
    FROM (SELECT 1) LEFT JOIN screens s ON s.kind = 'revision' AND s.item_id = NEW.id LEFT JOIN scores sc ON sc.revision_id = NEW.id;
END;
CREATE TRIGGER revisions_mine_row_update AFTER UPDATE ON revisions
    WHEN OLD.id IS NOT NEW.id OR OLD.user_id IS NOT NEW.user_id OR OLD.created_at IS NOT NEW.created_at
        OR OLD.song_id IS NOT NEW.song_id OR OLD.title IS NOT NEW.title BEGIN
    DELETE FROM mine_rows WHERE user_id = OLD.user_id AND created_at = OLD.created_at AND kind_order = 2 AND id = OLD.id;
    INSERT INTO mine_rows
    SELECT NEW.user_id, NEW.created_at, 2, NEW.id, NEW.song_id, NEW.title, s.verdict, s.confidence, sc.art, sc.art_runs, sc.criteria, sc.model, sc.rubric
    FROM (SELECT 1) LEFT JOIN screens s ON s.kind = 'revision' AND s.item_id = NEW.id LEFT JOIN scores sc ON sc.revision_id = NEW.id;
END;
CREATE TRIGGER revisions_mine_row_delete AFTER DELETE ON revisions BEGIN
    DELETE FROM mine_rows WHERE user_id = OLD.user_id AND created_at = OLD.created_at AND kind_order = 2 AND id = OLD.id;
END;
CREATE TRIGGER comments_mine_row AFTER INSERT ON comments BEGIN
    INSERT INTO mine_rows (user_id, created_at, kind_order, id, song_id, verdict, confidence)
    SELECT NEW.user_id, NEW.created_at, 1, NEW.id, NEW.song_id, s.verdict, s.confidence
    FROM (SELECT 1) LEFT JOIN screens s ON s.kind = 'comment' AND s.item_id = NEW.id;
END;
CREATE TRIGGER comments_mine_row_update AFTER UPDATE ON comments
    WHEN OLD.id IS NOT NEW.id OR OLD.user_id IS NOT NEW.user_id OR OLD.created_at IS NOT NEW.created_at
        OR OLD.song_id IS NOT NEW.song_id BEGIN
    DELETE FROM mine_rows WHERE user_id = OLD.user_id AND created_at = OLD.created_at AND kind_order = 1 AND id = OLD.id;
    INSERT INTO mine_rows (user_id, created_at, kind_order, id, song_id, verdict, confidence)
    SELECT NEW.user_id, NEW.created_at, 1, NEW.id, NEW.song_id, s.verdict, s.confidence
    FROM (SELECT 1) LEFT JOIN screens s ON s.kind = 'comment' AND s.item_id = NEW.id;
END;
CREATE TRIGGER comments_mine_row_delete AFTER DELETE ON comments BEGIN
    DELETE FROM mine_rows WHERE user_id = OLD.user_id AND created_at = OLD.created_at AND kind_order = 1 AND id = OLD.id;
END;
CREATE TRIGGER pitches_mine_row AFTER INSERT ON pitches BEGIN
    INSERT INTO mine_rows (user_id, created_at, kind_order, id, verdict, confidence)
    SELECT NEW.user_id, NEW.created_at, 0, NEW.id, s.verdict, s.confidence
    FROM (SELECT 1) LEFT JOIN screens s ON s.kind = 'pitch' AND s.item_id = NEW.id;
END;
CREATE TRIGGER pitches_mine_row_update AFTER UPDATE ON pitches
    WHEN OLD.id IS NOT NEW.id OR OLD.user_id IS NOT NEW.user_id OR OLD.created_at IS NOT NEW.created_at BEGIN
    DELETE FROM mine_rows WHERE user_id = OLD.user_id AND created_at = OLD.created_at AND kind_order = 0 AND id = OLD.id;
    INSERT INTO mine_rows (user_id, created_at, kind_order, id, verdict, confidence)
    SELECT NEW.user_id, NEW.created_at, 0, NEW.id, s.verdict, s.confidence
    FROM (SELECT 1) LEFT JOIN screens s ON s.kind = 'pitch' AND s.item_id = NEW.id;
END;
CREATE TRIGGER pitches_mine_row_delete AFTER DELETE ON pitches BEGIN
    DELETE FROM mine_rows WHERE user_id = OLD.user_id AND created_at = OLD.created_at AND kind_order = 0 AND id = OLD.id;
END;

-- Verdicts: the item's row, found through the item (a probe of its table by id, then of
-- mine_rows by key; mine_items names the three tables as one, and SQLite pushes the kind and id
-- into each branch), takes a new verdict; a deleted one is cleared; an updated one reads both
-- its old and its new item's verdicts afresh.
CREATE VIEW mine_items (kind, item_id, user_id, created_at, kind_order) AS
    SELECT 'revision', id, user_id, created_at, 2 FROM revisions
    UNION ALL SELECT 'comment', id, user_id, created_at, 1 FROM comments
    UNION ALL SELECT 'pitch', id, user_id, created_at, 0 FROM pitches;
CREATE TRIGGER screens_mine_row AFTER INSERT ON screens BEGIN
    UPDATE mine_rows SET verdict = NEW.verdict, confidence = NEW.confidence FROM mine_items i
    WHERE i.kind = NEW.kind AND i.item_id = NEW.item_id AND mine_rows.user_id = i.user_id
        AND mine_rows.created_at = i.created_at AND mine_rows.kind_order = i.kind_order AND mine_rows.id = i.item_id;
END;
CREATE TRIGGER screens_mine_row_update AFTER UPDATE ON screens BEGIN
    UPDATE mine_rows SET verdict = s.verdict, confidence = s.confidence
    FROM mine_items i LEFT JOIN screens s ON s.kind = i.kind AND s.item_id = i.item_id
    WHERE ((i.kind = OLD.kind AND i.item_id = OLD.item_id) OR (i.kind = NEW.kind AND i.item_id = NEW.item_id))
        AND mine_rows.user_id = i.user_id AND mine_rows.created_at = i.created_at AND mine_rows.kind_order = i.kind_order AND mine_rows.id = i.item_id;
END;
CREATE TRIGGER screens_mine_row_delete AFTER DELETE ON screens BEGIN
    UPDATE mine_rows SET verdict = NULL, confidence = NULL FROM mine_items i
    WHERE i.kind = OLD.kind AND i.item_id = OLD.item_id AND mine_rows.user_id = i.user_id
        AND mine_rows.created_at = i.created_at AND mine_rows.kind_order = i.kind_order AND mine_rows.id = i.item_id;
END;

-- Scores: the same for a revision's score.
CREATE TRIGGER scores_mine_row AFTER INSERT ON scores BEGIN
    UPDATE mine_rows SET art = NEW.art, art_runs = NEW.art_runs, criteria = NEW.criteria, model = NEW.model, rubric = NEW.rubric
    FROM revisions r WHERE r.id = NEW.revision_id AND mine_rows.user_id = r.user_id AND mine_rows.created_at = r.created_at
        AND mine_rows.kind_order = 2 AND mine_rows.id = r.id;
END;
CREATE TRIGGER scores_mine_row_update AFTER UPDATE ON scores BEGIN
    UPDATE mine_rows SET art = sc.art, art_runs = sc.art_runs, criteria = sc.criteria, model = sc.model, rubric = sc.rubric
    FROM revisions r LEFT JOIN scores sc ON sc.revision_id = r.id
    WHERE r.id IN (OLD.revision_id, NEW.revision_id) AND mine_rows.user_id = r.user_id AND mine_rows.created_at = r.created_at
        AND mine_rows.kind_order = 2 AND mine_rows.id = r.id;
END;
CREATE TRIGGER scores_mine_row_delete AFTER DELETE ON scores BEGIN
    UPDATE mine_rows SET art = NULL, art_runs = NULL, criteria = NULL, model = NULL, rubric = NULL
    FROM revisions r WHERE r.id = OLD.revision_id AND mine_rows.user_id = r.user_id AND mine_rows.created_at = r.created_at
        AND mine_rows.kind_order = 2 AND mine_rows.id = r.id;
END;
