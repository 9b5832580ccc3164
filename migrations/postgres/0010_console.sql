-- The operators' console (issue 14).
--
-- Every attempt keeps what went wrong in words (error); a verdict by hand is an event with the
-- admin's id, note and the verdict decided. A job keeps its last attempt's error, so the list
-- shows it without reading the events.
ALTER TABLE events ADD COLUMN error text;
ALTER TABLE events ADD COLUMN admin_id bigint;
ALTER TABLE events ADD COLUMN note text;
ALTER TABLE events ADD COLUMN verdict text;
ALTER TABLE content_jobs ADD COLUMN last_error text;

-- Holds: one row, read by every claim on every replica, so held work is claimed by none.
-- A held job's row is left as it is (why shows 'held' while the hold lasts), so lifting the
-- hold makes the jobs due again with their own due times.
CREATE TABLE holds (
    id         integer PRIMARY KEY CHECK (id = 1),
    screen     integer NOT NULL DEFAULT 0 CHECK (screen IN (0, 1)),
    score      integer NOT NULL DEFAULT 0 CHECK (score IN (0, 1)),
    deliveries integer NOT NULL DEFAULT 0 CHECK (deliveries IN (0, 1)),
    updated_at bigint,
    updated_by bigint
);
INSERT INTO holds (id) VALUES (1);

-- A hold changes every author's view (their held jobs say why held): it wakes every waiting
-- long poll and stream on every replica, with the payload '<schema>:*' (package notify).
CREATE FUNCTION owed_holds_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('owed_mine', TG_TABLE_SCHEMA || ':*');
    RETURN NULL;
END $$;
CREATE TRIGGER holds_mine_notify AFTER UPDATE ON holds FOR EACH ROW
    WHEN (OLD.screen IS DISTINCT FROM NEW.screen OR OLD.score IS DISTINCT FROM NEW.score)
    EXECUTE FUNCTION owed_holds_notify();
