-- The operators' console (issue 14).
--
-- Every attempt keeps what went wrong in words (error); a verdict by hand is an event with the
-- admin's id, note and the verdict decided. A job keeps its last attempt's error, so the list
-- shows it without reading the events.
ALTER TABLE events ADD COLUMN error TEXT;
ALTER TABLE events ADD COLUMN admin_id INTEGER;
ALTER TABLE events ADD COLUMN note TEXT;
ALTER TABLE events ADD COLUMN verdict TEXT;
ALTER TABLE content_jobs ADD COLUMN last_error TEXT;

-- Holds: one row, read by every claim on every replica, so held work is claimed by none.
-- A held job's row is left as it is (why shows 'held' while the hold lasts), so lifting the
-- hold makes the jobs due again with their own due times.
CREATE TABLE holds (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    screen     INTEGER NOT NULL DEFAULT 0 CHECK (screen IN (0, 1)),
    score      INTEGER NOT NULL DEFAULT 0 CHECK (score IN (0, 1)),
    deliveries INTEGER NOT NULL DEFAULT 0 CHECK (deliveries IN (0, 1)),
    updated_at INTEGER,
    updated_by INTEGER
);
INSERT INTO holds (id) VALUES (1);
