-- Chat archives ("scrapes"), their media rows, and the backfill queue that previews them (SQLite).
-- Times are integer milliseconds since the Unix epoch, UTC.

-- A scrape is one archive run of a chat. Deleted scrapes stay as tombstones (state 'deleted')
-- so the bot can see its delete went through; their media rows are gone.
CREATE TABLE scrapes (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_id    TEXT    NOT NULL,
    guild_id   TEXT,
    backend    TEXT    NOT NULL,
    mode       TEXT    NOT NULL,
    state      TEXT    NOT NULL DEFAULT 'active'
               CHECK (state IN ('active', 'paused', 'done', 'failed', 'pending-delete', 'deleting', 'deleted')),
    downloaded INTEGER NOT NULL DEFAULT 0,
    pushed_at  INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX scrapes_chat ON scrapes (chat_id, id);
-- The walk lock reads the newest push of an active scrape from this index.
CREATE INDEX scrapes_state_pushed ON scrapes (state, pushed_at);

CREATE TABLE media (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    scrape_id    INTEGER NOT NULL REFERENCES scrapes (id) ON DELETE CASCADE,
    kind         TEXT    NOT NULL CHECK (kind IN ('image', 'gif', 'video', 'audio')),
    url          TEXT    NOT NULL,
    bytes        INTEGER,
    state        TEXT    NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'cached', 'failed', 'suspect', 'unverified', 'skipped')),
    stored_bytes INTEGER NOT NULL DEFAULT 0,
    updated_at   INTEGER NOT NULL
);
CREATE INDEX media_scrape_state ON media (scrape_id, state, id);

-- Each scrape's media rows by preview state (and pending rows by kind), kept by the triggers
-- below in the same transaction as every row change, so that the backfill status reads one
-- row per scrape instead of counting millions of media rows.
CREATE TABLE scrape_totals (
    scrape_id     INTEGER PRIMARY KEY REFERENCES scrapes (id) ON DELETE CASCADE,
    pending       INTEGER NOT NULL DEFAULT 0,
    cached        INTEGER NOT NULL DEFAULT 0,
    failed        INTEGER NOT NULL DEFAULT 0,
    suspect       INTEGER NOT NULL DEFAULT 0,
    unverified    INTEGER NOT NULL DEFAULT 0,
    skipped       INTEGER NOT NULL DEFAULT 0,
    total         INTEGER NOT NULL DEFAULT 0,
    stored_bytes  INTEGER NOT NULL DEFAULT 0,
    pending_image INTEGER NOT NULL DEFAULT 0,
    pending_gif   INTEGER NOT NULL DEFAULT 0,
    pending_video INTEGER NOT NULL DEFAULT 0,
    pending_audio INTEGER NOT NULL DEFAULT 0
);

CREATE TRIGGER scrapes_totalled AFTER INSERT ON scrapes BEGIN
    INSERT INTO scrape_totals (scrape_id) VALUES (NEW.id);
END;

CREATE TRIGGER media_counted AFTER INSERT ON media BEGIN
    UPDATE scrape_totals SET
        pending = pending + (NEW.state = 'pending'), cached = cached + (NEW.state = 'cached'), failed = failed + (NEW.state = 'failed'),
        suspect = suspect + (NEW.state = 'suspect'), unverified = unverified + (NEW.state = 'unverified'), skipped = skipped + (NEW.state = 'skipped'),
        total = total + 1, stored_bytes = stored_bytes + NEW.stored_bytes,
        pending_image = pending_image + (NEW.state = 'pending' AND NEW.kind = 'image'), pending_gif = pending_gif + (NEW.state = 'pending' AND NEW.kind = 'gif'),
        pending_video = pending_video + (NEW.state = 'pending' AND NEW.kind = 'video'), pending_audio = pending_audio + (NEW.state = 'pending' AND NEW.kind = 'audio')
    WHERE scrape_id = NEW.scrape_id;
END;

CREATE TRIGGER media_recounted AFTER UPDATE OF scrape_id, kind, state, stored_bytes ON media BEGIN
    UPDATE scrape_totals SET
        pending = pending - (OLD.state = 'pending'), cached = cached - (OLD.state = 'cached'), failed = failed - (OLD.state = 'failed'),
        suspect = suspect - (OLD.state = 'suspect'), unverified = unverified - (OLD.state = 'unverified'), skipped = skipped - (OLD.state = 'skipped'),
        total = total - 1, stored_bytes = stored_bytes - OLD.stored_bytes,
        pending_image = pending_image - (OLD.state = 'pending' AND OLD.kind = 'image'), pending_gif = pending_gif - (OLD.state = 'pending' AND OLD.kind = 'gif'),
        pending_video = pending_video - (OLD.state = 'pending' AND OLD.kind = 'video'), pending_audio = pending_audio - (OLD.state = 'pending' AND OLD.kind = 'audio')
    WHERE scrape_id = OLD.scrape_id;
    UPDATE scrape_totals SET
        pending = pending + (NEW.state = 'pending'), cached = cached + (NEW.state = 'cached'), failed = failed + (NEW.state = 'failed'),
        suspect = suspect + (NEW.state = 'suspect'), unverified = unverified + (NEW.state = 'unverified'), skipped = skipped + (NEW.state = 'skipped'),
        total = total + 1, stored_bytes = stored_bytes + NEW.stored_bytes,
        pending_image = pending_image + (NEW.state = 'pending' AND NEW.kind = 'image'), pending_gif = pending_gif + (NEW.state = 'pending' AND NEW.kind = 'gif'),
        pending_video = pending_video + (NEW.state = 'pending' AND NEW.kind = 'video'), pending_audio = pending_audio + (NEW.state = 'pending' AND NEW.kind = 'audio')
    WHERE scrape_id = NEW.scrape_id;
END;

CREATE TRIGGER media_uncounted AFTER DELETE ON media BEGIN
    UPDATE scrape_totals SET
        pending = pending - (OLD.state = 'pending'), cached = cached - (OLD.state = 'cached'), failed = failed - (OLD.state = 'failed'),
        suspect = suspect - (OLD.state = 'suspect'), unverified = unverified - (OLD.state = 'unverified'), skipped = skipped - (OLD.state = 'skipped'),
        total = total - 1, stored_bytes = stored_bytes - OLD.stored_bytes,
        pending_image = pending_image - (OLD.state = 'pending' AND OLD.kind = 'image'), pending_gif = pending_gif - (OLD.state = 'pending' AND OLD.kind = 'gif'),
        pending_video = pending_video - (OLD.state = 'pending' AND OLD.kind = 'video'), pending_audio = pending_audio - (OLD.state = 'pending' AND OLD.kind = 'audio')
    WHERE scrape_id = OLD.scrape_id;
END;

-- The queue's settings: one row.
CREATE TABLE backfill_settings (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    batch_size     INTEGER NOT NULL,
    batch_pause_ms INTEGER NOT NULL,
    auto           INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
INSERT INTO backfill_settings (id, batch_size, batch_pause_ms, auto, updated_at) VALUES (1, 20, 2000, 0, 0);

-- One job per chat that was ever started; a chat without a row is idle. position is the
-- execution order (first start first). cooldown_ms is null until suspect failures raise the
-- pause between batches for the rest of the run; stalled counts batches in a row without
-- progress. active_at is the last time the job was started or did work.
CREATE TABLE backfill_jobs (
    chat_id     TEXT    PRIMARY KEY,
    guild_id    TEXT,
    state       TEXT    NOT NULL CHECK (state IN ('running', 'paused', 'done')),
    position    INTEGER NOT NULL,
    processed   INTEGER NOT NULL DEFAULT 0,
    per_minute  REAL,
    started_at  INTEGER,
    finished_at INTEGER,
    cooldown_ms INTEGER,
    stalled     INTEGER NOT NULL DEFAULT 0,
    active_at   INTEGER NOT NULL
);
CREATE INDEX backfill_jobs_order ON backfill_jobs (state, position);

-- The queue runner: the process holding the lease runs the queue; chat_id is the job it is
-- running, limited_until the rate limit it is waiting out.
CREATE TABLE backfill_runner (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    owner         TEXT,
    lease_until   INTEGER,
    chat_id       TEXT,
    limited_until INTEGER
);
INSERT INTO backfill_runner (id) VALUES (1);
