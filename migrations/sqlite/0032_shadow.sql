-- Shadow models (SQLite): a candidate model or rubric asked beside the live one, its answers
-- recorded and never acted on, and its promotion. Times are integer milliseconds since the
-- Unix epoch, UTC.
--
-- model_settings, one row: candidate is the candidate's name ("model rubric") as the
-- processes were started with it (null: none), set since candidate_since; shadow_screens is 1
-- when the candidate is a model of its own (a rubric alone changes no verdict, so then only
-- scores are shadowed). live_model and live_rubric, when set, are the promoted candidate's: the
-- live model and rubric from live_since on (null: the configured live ones). shadow_day and
-- shadow_calls count the candidate's calls on one UTC day (its daily limit).
CREATE TABLE model_settings (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    candidate      TEXT,
    candidate_since INTEGER,
    shadow_screens INTEGER NOT NULL DEFAULT 0 CHECK (shadow_screens IN (0, 1)),
    live_model     TEXT,
    live_rubric    TEXT,
    live_since     INTEGER,
    shadow_day     INTEGER NOT NULL DEFAULT 0,
    shadow_calls   INTEGER NOT NULL DEFAULT 0
);
INSERT INTO model_settings (id) VALUES (1);

-- The owed shadow calls: one per live verdict or score settled while a candidate is set and
-- not promoted. Claimed like content jobs (a lease), but only while no live job is due. No key
-- but the id: an item settles once (a second call for one item, after a rollback's re-score,
-- records nothing twice: the answers' tables are keyed), and each index is a write on the live
-- verdict's path.
CREATE TABLE shadow_jobs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task        TEXT    NOT NULL CHECK (task IN ('screen', 'score')),
    kind        TEXT    NOT NULL CHECK (kind IN ('revision', 'comment', 'pitch')),
    item_id     INTEGER NOT NULL,
    due_at      INTEGER NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    why         TEXT,
    last_error  TEXT,
    lease_until INTEGER,
    lease_owner TEXT,
    created_at  INTEGER NOT NULL DEFAULT (CAST(round((julianday('now') - 2440587.5) * 86400000) AS INTEGER))
);
CREATE INDEX shadow_jobs_due ON shadow_jobs (due_at, id);

-- The candidate's answers beside the live ones they shadow (copied when recorded).
CREATE TABLE shadow_screens (
    kind            TEXT    NOT NULL CHECK (kind IN ('revision', 'comment', 'pitch')),
    item_id         INTEGER NOT NULL,
    model           TEXT    NOT NULL,
    verdict         TEXT    NOT NULL CHECK (verdict IN ('allow', 'block')),
    confidence      REAL    NOT NULL,
    live_verdict    TEXT    NOT NULL CHECK (live_verdict IN ('allow', 'block')),
    live_confidence REAL    NOT NULL,
    screened_at     INTEGER NOT NULL,
    PRIMARY KEY (kind, item_id, model)
);
CREATE TABLE shadow_scores (
    revision_id INTEGER NOT NULL,
    song_id     INTEGER NOT NULL,
    model       TEXT    NOT NULL,
    rubric      TEXT    NOT NULL,
    art         REAL    NOT NULL,
    art_runs    TEXT    NOT NULL,
    live_art    REAL    NOT NULL,
    live_rubric TEXT    NOT NULL,
    scored_at   INTEGER NOT NULL,
    PRIMARY KEY (revision_id, model, rubric)
);
-- The public list's rank correlation joins the candidate's scores to their songs.
CREATE INDEX shadow_scores_song ON shadow_scores (song_id);

-- A settled live verdict or score owes its shadow call, in the same transaction.
CREATE TRIGGER screens_owe_shadow AFTER INSERT ON screens
WHEN (SELECT candidate IS NOT NULL AND shadow_screens = 1 AND live_model IS NULL FROM model_settings WHERE id = 1) BEGIN
    INSERT INTO shadow_jobs (task, kind, item_id, due_at) VALUES ('screen', NEW.kind, NEW.item_id, NEW.screened_at);
END;
CREATE TRIGGER scores_owe_shadow AFTER INSERT ON scores
WHEN (SELECT candidate IS NOT NULL AND live_model IS NULL FROM model_settings WHERE id = 1) BEGIN
    INSERT INTO shadow_jobs (task, kind, item_id, due_at) VALUES ('score', 'revision', NEW.revision_id, NEW.scored_at);
END;

-- The rubric of a song's art (its newest scored revision's score), kept by the scores' own
-- triggers: public lists put the songs scored under the live rubric first (docs/shadow.md).
ALTER TABLE songs ADD COLUMN score_rubric TEXT;
UPDATE songs SET score_rubric = (SELECT sc.rubric FROM scores sc JOIN revisions r ON r.id = sc.revision_id
    WHERE r.song_id = songs.id ORDER BY r.id DESC LIMIT 1);
CREATE INDEX songs_public_rubric_art ON songs (public, score_rubric, art DESC, id DESC);
CREATE TRIGGER scores_song_rubric AFTER INSERT ON scores BEGIN
    UPDATE songs SET score_rubric = (SELECT sc.rubric FROM scores sc JOIN revisions r ON r.id = sc.revision_id
        WHERE r.song_id = NEW.song_id ORDER BY r.id DESC LIMIT 1) WHERE id = NEW.song_id;
END;
CREATE TRIGGER scores_song_rubric_delete AFTER DELETE ON scores BEGIN
    UPDATE songs SET score_rubric = (SELECT sc.rubric FROM scores sc JOIN revisions r ON r.id = sc.revision_id
        WHERE r.song_id = OLD.song_id ORDER BY r.id DESC LIMIT 1) WHERE id = OLD.song_id;
END;
