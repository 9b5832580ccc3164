-- owed core schema (SQLite). Times are integer milliseconds since the Unix epoch, UTC.

CREATE TABLE users (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT    NOT NULL,
    role        TEXT    NOT NULL CHECK (role IN ('author', 'bot', 'admin')),
    token_hash  TEXT    NOT NULL UNIQUE,
    daily_limit INTEGER,
    created_at  INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER))
);

-- A signed-in browser: the cookie holds the session id, the table its hash.
CREATE TABLE sessions (
    id_hash    TEXT    PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at INTEGER NOT NULL
);

-- public and art are maintained by the triggers below, so the public list sorts by an index.
CREATE TABLE songs (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id         INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title           TEXT    NOT NULL,
    public          INTEGER NOT NULL DEFAULT 0,
    art             REAL,
    created_at      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER))
);
CREATE INDEX songs_user ON songs (user_id);
CREATE INDEX songs_public_art ON songs (public, art DESC, id DESC);
CREATE INDEX songs_public_id ON songs (public, id DESC);

CREATE TABLE revisions (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    song_id    INTEGER NOT NULL REFERENCES songs (id) ON DELETE CASCADE,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title      TEXT    NOT NULL,
    code       TEXT    NOT NULL,
    created_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER))
);
CREATE INDEX revisions_song ON revisions (song_id, id);
CREATE INDEX revisions_user ON revisions (user_id, id);

CREATE TABLE comments (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    song_id    INTEGER NOT NULL REFERENCES songs (id) ON DELETE CASCADE,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    body       TEXT    NOT NULL,
    created_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER))
);
CREATE INDEX comments_song ON comments (song_id, id);
CREATE INDEX comments_user ON comments (user_id, id);

CREATE TABLE pitches (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    body       TEXT    NOT NULL,
    created_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER))
);
CREATE INDEX pitches_user ON pitches (user_id, id);

-- One verdict per item; kind is revision, comment or pitch.
CREATE TABLE screens (
    kind        TEXT    NOT NULL CHECK (kind IN ('revision', 'comment', 'pitch')),
    item_id     INTEGER NOT NULL,
    verdict     TEXT    NOT NULL CHECK (verdict IN ('allow', 'block')),
    confidence  REAL    NOT NULL,
    screened_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    PRIMARY KEY (kind, item_id)
);
CREATE INDEX screens_public ON screens (kind, verdict, item_id);

CREATE TABLE scores (
    revision_id INTEGER PRIMARY KEY REFERENCES revisions (id) ON DELETE CASCADE,
    song_id     INTEGER NOT NULL,
    art         REAL    NOT NULL,
    art_runs    TEXT    NOT NULL,
    criteria    TEXT    NOT NULL,
    model       TEXT    NOT NULL,
    rubric      TEXT    NOT NULL,
    scored_at   INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER))
);

-- The owed work. why is null while a job is simply due.
CREATE TABLE content_jobs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task        TEXT    NOT NULL CHECK (task IN ('screen', 'score')),
    kind        TEXT    NOT NULL CHECK (kind IN ('revision', 'comment', 'pitch')),
    item_id     INTEGER NOT NULL,
    user_id     INTEGER NOT NULL,
    due_at      INTEGER NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    why         TEXT CHECK (why IN ('unreachable', 'upstream', 'unanswered', 'budget', 'budget-unavailable')),
    status      INTEGER,
    lease_until INTEGER,
    lease_owner TEXT,
    created_at  INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    UNIQUE (task, kind, item_id)
);
CREATE INDEX content_jobs_due ON content_jobs (due_at, id);
CREATE INDEX content_jobs_user_due ON content_jobs (user_id, due_at);
CREATE INDEX content_jobs_why ON content_jobs (why, id);

-- Model calls charged per author per UTC day (day is YYYY-MM-DD).
CREATE TABLE budgets (
    user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    day     TEXT    NOT NULL,
    spent   INTEGER NOT NULL,
    PRIMARY KEY (user_id, day)
);

CREATE TABLE events (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    at            INTEGER NOT NULL,
    event         TEXT    NOT NULL,
    kind          TEXT    NOT NULL,
    item_id       INTEGER NOT NULL,
    user_id       INTEGER NOT NULL,
    outcome       TEXT    NOT NULL,
    why           TEXT,
    status        INTEGER,
    upstream_ms   INTEGER,
    attempt       INTEGER NOT NULL,
    confidence    REAL,
    art           REAL,
    request_bytes INTEGER,
    runs          INTEGER
);
CREATE INDEX events_at ON events (at);
CREATE INDEX events_item ON events (kind, item_id, id);
CREATE INDEX events_user ON events (user_id, id);

-- Writing an item owes its screening.
CREATE TRIGGER revisions_owe_screen AFTER INSERT ON revisions BEGIN
    INSERT INTO content_jobs (task, kind, item_id, user_id, due_at)
    VALUES ('screen', 'revision', NEW.id, NEW.user_id, NEW.created_at)
    ON CONFLICT (task, kind, item_id) DO NOTHING;
END;
CREATE TRIGGER comments_owe_screen AFTER INSERT ON comments BEGIN
    INSERT INTO content_jobs (task, kind, item_id, user_id, due_at)
    VALUES ('screen', 'comment', NEW.id, NEW.user_id, NEW.created_at)
    ON CONFLICT (task, kind, item_id) DO NOTHING;
END;
CREATE TRIGGER pitches_owe_screen AFTER INSERT ON pitches BEGIN
    INSERT INTO content_jobs (task, kind, item_id, user_id, due_at)
    VALUES ('screen', 'pitch', NEW.id, NEW.user_id, NEW.created_at)
    ON CONFLICT (task, kind, item_id) DO NOTHING;
END;

-- A verdict settles the screening; an allowed revision then owes its score.
CREATE TRIGGER screens_settle AFTER INSERT ON screens BEGIN
    DELETE FROM content_jobs WHERE task = 'screen' AND kind = NEW.kind AND item_id = NEW.item_id;
    INSERT INTO content_jobs (task, kind, item_id, user_id, due_at)
    SELECT 'score', 'revision', r.id, r.user_id, NEW.screened_at
    FROM revisions r
    WHERE NEW.kind = 'revision' AND NEW.verdict = 'allow' AND r.id = NEW.item_id
      AND NOT EXISTS (SELECT 1 FROM scores s WHERE s.revision_id = r.id)
    ON CONFLICT (task, kind, item_id) DO NOTHING;
    UPDATE songs SET
        public = EXISTS (SELECT 1 FROM revisions r JOIN screens s ON s.kind = 'revision' AND s.item_id = r.id
                         WHERE r.song_id = songs.id AND s.verdict = 'allow'),
        art = (SELECT sc.art FROM scores sc JOIN revisions r ON r.id = sc.revision_id
               WHERE r.song_id = songs.id ORDER BY r.id DESC LIMIT 1)
    WHERE NEW.kind = 'revision' AND id = (SELECT song_id FROM revisions WHERE id = NEW.item_id);
END;

-- A score settles the scoring and becomes the song's art when it is the newest.
CREATE TRIGGER scores_settle AFTER INSERT ON scores BEGIN
    DELETE FROM content_jobs WHERE task = 'score' AND kind = 'revision' AND item_id = NEW.revision_id;
    UPDATE songs SET
        art = (SELECT sc.art FROM scores sc JOIN revisions r ON r.id = sc.revision_id
               WHERE r.song_id = songs.id ORDER BY r.id DESC LIMIT 1)
    WHERE id = NEW.song_id;
END;

-- Deleting an item takes its owed work and its verdict with it.
CREATE TRIGGER revisions_forget AFTER DELETE ON revisions BEGIN
    DELETE FROM content_jobs WHERE kind = 'revision' AND item_id = OLD.id;
    DELETE FROM screens WHERE kind = 'revision' AND item_id = OLD.id;
    UPDATE songs SET
        public = EXISTS (SELECT 1 FROM revisions r JOIN screens s ON s.kind = 'revision' AND s.item_id = r.id
                         WHERE r.song_id = songs.id AND s.verdict = 'allow'),
        art = (SELECT sc.art FROM scores sc JOIN revisions r ON r.id = sc.revision_id
               WHERE r.song_id = songs.id ORDER BY r.id DESC LIMIT 1)
    WHERE id = OLD.song_id;
END;
CREATE TRIGGER comments_forget AFTER DELETE ON comments BEGIN
    DELETE FROM content_jobs WHERE kind = 'comment' AND item_id = OLD.id;
    DELETE FROM screens WHERE kind = 'comment' AND item_id = OLD.id;
END;
CREATE TRIGGER pitches_forget AFTER DELETE ON pitches BEGIN
    DELETE FROM content_jobs WHERE kind = 'pitch' AND item_id = OLD.id;
    DELETE FROM screens WHERE kind = 'pitch' AND item_id = OLD.id;
END;
