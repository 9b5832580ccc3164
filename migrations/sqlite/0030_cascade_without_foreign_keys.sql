-- Every ON DELETE CASCADE of the schema again as a trigger, so that a writer with foreign keys
-- off (the sqlite3 shell's default, and SQLite's) still takes a parent's children, and with
-- them the owed work their own delete triggers take (content jobs, screens, reviews, mine_rows,
-- versions and counts). With foreign keys on, as owed's connections have them, the cascade and
-- the trigger delete the same rows, and whichever comes second finds none. No trigger here
-- deletes from its own table, so none relies on recursive_triggers.
CREATE TRIGGER users_cascade AFTER DELETE ON users BEGIN
    DELETE FROM sessions WHERE user_id = OLD.id;
    DELETE FROM songs WHERE user_id = OLD.id;
    DELETE FROM revisions WHERE user_id = OLD.id;
    DELETE FROM comments WHERE user_id = OLD.id;
    DELETE FROM pitches WHERE user_id = OLD.id;
    DELETE FROM budgets WHERE user_id = OLD.id;
    DELETE FROM stream_tickets WHERE user_id = OLD.id;
END;
CREATE TRIGGER songs_cascade AFTER DELETE ON songs BEGIN
    DELETE FROM revisions WHERE song_id = OLD.id;
    DELETE FROM comments WHERE song_id = OLD.id;
END;
CREATE TRIGGER revisions_cascade AFTER DELETE ON revisions BEGIN
    DELETE FROM scores WHERE revision_id = OLD.id;
END;
CREATE TRIGGER scrapes_cascade AFTER DELETE ON scrapes BEGIN
    DELETE FROM media WHERE scrape_id = OLD.id;
    DELETE FROM scrape_totals WHERE scrape_id = OLD.id;
END;
CREATE TRIGGER webhooks_cascade AFTER DELETE ON webhooks BEGIN
    DELETE FROM webhook_deliveries WHERE webhook_id = OLD.id;
END;
CREATE TRIGGER webhook_deliveries_cascade AFTER DELETE ON webhook_deliveries BEGIN
    DELETE FROM webhook_attempts WHERE delivery_id = OLD.id;
END;
