-- The model's breaker (PostgreSQL): one row shared by every replica, so that while the model
-- is down the replicas together send one probe at a time (claimed by a conditional UPDATE of
-- this row). Times are integer milliseconds since the Unix epoch, UTC.
--
-- state: closed (asking), open (not asking; due jobs wait for next_probe_at), probing (one
-- job's call, owned by probe_owner until probe_until, tests the model). since: when the state
-- began. failures: consecutive failures that opened it, plus each failed probe. probes: failed
-- probes since it opened (the probe backoff's position). why and status: the failure that
-- opened it, kept by the jobs it puts off.
CREATE TABLE model_breaker (
    id            integer PRIMARY KEY CHECK (id = 1),
    state         text    NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open', 'probing')),
    since         bigint,
    failures      integer NOT NULL DEFAULT 0,
    probes        integer NOT NULL DEFAULT 0,
    why           text,
    status        integer,
    next_probe_at bigint,
    probe_owner   text,
    probe_until   bigint
);

INSERT INTO model_breaker (id, state) VALUES (1, 'closed');
