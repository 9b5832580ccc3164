-- Operators during an incident (issue 24).
--
-- The audit trail: every operator action, who did it, when, on what, and what changed (before
-- and after as JSON text), written in the same transaction as the action. admin_name is kept as
-- it was at the time, so the trail reads the same after a rename or a deletion.
CREATE TABLE audit (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at         INTEGER NOT NULL,
    admin_id   INTEGER,
    admin_name TEXT    NOT NULL DEFAULT '',
    action     TEXT    NOT NULL,
    target     TEXT    NOT NULL DEFAULT '',
    before     TEXT,
    after      TEXT
);
CREATE INDEX audit_at ON audit (at);
CREATE INDEX audit_action ON audit (action, id);

-- The breaker keeps the last real error in words (shown by health and the Model tile), and when
-- an admin last asked for a probe by hand (at most one every 5 s across replicas).
ALTER TABLE model_breaker ADD COLUMN last_error TEXT;
ALTER TABLE model_breaker ADD COLUMN manual_probe_at INTEGER;
