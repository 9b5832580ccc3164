-- Moderation beyond the job queue (issue 28): the review band, appeals and the review queue.
--
-- A screen job whose model verdict was less sure than the review band waits for a moderator:
-- why 'review', due at the far future (so no claimer, sweep, breaker pass or retry by time
-- touches it), and a reviews row keeps the model's suggestion. The CHECK on content_jobs.why
-- gains 'review'. Widening a CHECK leaves every stored row valid, so it is made in place
-- (SQLite's documented "writable_schema" procedure for changes that do not touch stored
-- content) instead of rebuilding the table and its triggers.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql, '''budget-unavailable''', '''budget-unavailable'', ''review''')
    WHERE type = 'table' AND name = 'content_jobs' AND sql NOT LIKE '%''review''%';
PRAGMA writable_schema = RESET;

-- The review queue: one row per item and reason. 'unsure': the model's verdict fell below the
-- band (suggestion and confidence are the model's). 'appeal': the author appealed a block
-- (suggestion 'block', the block's confidence; blocked_by the admin who blocked by hand, null
-- when the model did). A moderator's claim (claimed_by until claim_until) keeps the entry from
-- other moderators; a decision fills decided_at, decided_by and outcome.
CREATE TABLE reviews (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT    NOT NULL CHECK (kind IN ('revision', 'comment', 'pitch')),
    item_id     INTEGER NOT NULL,
    user_id     INTEGER NOT NULL,
    reason      TEXT    NOT NULL CHECK (reason IN ('unsure', 'appeal')),
    entered_at  INTEGER NOT NULL,
    suggestion  TEXT    CHECK (suggestion IN ('allow', 'block')),
    confidence  REAL,
    note        TEXT,
    blocked_by  INTEGER,
    claimed_by  INTEGER,
    claim_until INTEGER,
    decided_at  INTEGER,
    decided_by  INTEGER,
    outcome     TEXT    CHECK (outcome IN ('allow', 'block')),
    UNIQUE (kind, item_id, reason)
);
CREATE INDEX reviews_open ON reviews (entered_at, id) WHERE decided_at IS NULL;
-- The counts by reason (index only) and the queue filtered by reason.
CREATE INDEX reviews_open_reason ON reviews (reason, entered_at, id) WHERE decided_at IS NULL;
CREATE INDEX reviews_user ON reviews (user_id, id);
CREATE INDEX reviews_decided ON reviews (decided_at) WHERE decided_at IS NOT NULL;

-- A verdict by hand (an event with outcome 'decided') decides the item's open entries, in the
-- same transaction as the verdict, whichever route recorded it.
CREATE TRIGGER events_decide_review AFTER INSERT ON events WHEN NEW.outcome = 'decided' BEGIN
    UPDATE reviews SET decided_at = NEW.at, decided_by = NEW.admin_id, outcome = NEW.verdict,
        claimed_by = NULL, claim_until = NULL
    WHERE kind = NEW.kind AND item_id = NEW.item_id AND decided_at IS NULL;
END;

-- Deleting an item takes its entries with it.
CREATE TRIGGER revisions_forget_reviews AFTER DELETE ON revisions BEGIN
    DELETE FROM reviews WHERE kind = 'revision' AND item_id = OLD.id;
END;
CREATE TRIGGER comments_forget_reviews AFTER DELETE ON comments BEGIN
    DELETE FROM reviews WHERE kind = 'comment' AND item_id = OLD.id;
END;
CREATE TRIGGER pitches_forget_reviews AFTER DELETE ON pitches BEGIN
    DELETE FROM reviews WHERE kind = 'pitch' AND item_id = OLD.id;
END;
