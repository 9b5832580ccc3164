-- The model's breaker (SQLite): one row, the state every claimer consults before asking the
-- model. Times are integer milliseconds since the Unix epoch, UTC.
--
-- state: closed (asking), open (not asking; due jobs wait for next_probe_at), probing (one
-- job's call, owned by probe_owner until probe_until, tests the model). since: when the state
-- began. failures: consecutive failures that opened it, plus each failed probe. probes: failed
-- probes since it opened (the probe backoff's position). why and status: the failure that
-- opened it, kept by the jobs it puts off.
CREATE TABLE model_breaker (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    state         TEXT    NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open', 'probing')),
    since         INTEGER,
    failures      INTEGER NOT NULL DEFAULT 0,
    probes        INTEGER NOT NULL DEFAULT 0,
    why           TEXT,
    status        INTEGER,
    next_probe_at INTEGER,
    probe_owner   TEXT,
    probe_until   INTEGER
);

INSERT INTO model_breaker (id, state) VALUES (1, 'closed');
