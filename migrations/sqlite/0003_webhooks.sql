-- Webhooks (SQLite): subscriptions, the deliveries owed to them, and every attempt at one.
-- Times are integer milliseconds since the Unix epoch, UTC.

-- A subscription. events is a JSON array of event names ("item.screened", "song.scored",
-- "backfill.finished", "*"); secret is the whsec_ signing key, shown once at creation.
-- disabled_reason says why an inactive subscription stopped: 'admin' (disabled through the
-- API) or 'gone' (its receiver answered 410).
CREATE TABLE webhooks (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    url             TEXT    NOT NULL,
    events          TEXT    NOT NULL,
    secret          TEXT    NOT NULL,
    active          INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
    disabled_reason TEXT CHECK (disabled_reason IN ('admin', 'gone')),
    created_at      INTEGER NOT NULL
);

-- One event owed to one subscription: written in the transaction of the result it reports,
-- pending until delivered, or cancelled when its subscription is disabled. msg_id is the
-- webhook-id header, the same on every attempt; payload is the body, the same on every attempt.
-- failures counts the failed attempts since the delivery was last made due (the retry
-- schedule's position); attempts counts them all.
CREATE TABLE webhook_deliveries (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook_id   INTEGER NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    msg_id       TEXT    NOT NULL,
    event        TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    status       TEXT    NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'cancelled')),
    due_at       INTEGER NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    failures     INTEGER NOT NULL DEFAULT 0,
    last_status  INTEGER,
    last_error   TEXT,
    lease_until  INTEGER,
    lease_owner  TEXT,
    delivered_at INTEGER,
    created_at   INTEGER NOT NULL,
    UNIQUE (webhook_id, msg_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (due_at, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (webhook_id, id);
CREATE INDEX webhook_deliveries_owner ON webhook_deliveries (lease_owner) WHERE lease_owner IS NOT NULL;

-- Every attempt at a delivery: the HTTP status (null when none came back), latency and error.
CREATE TABLE webhook_attempts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id INTEGER NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    status      INTEGER,
    latency_ms  INTEGER NOT NULL,
    error       TEXT
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, id);
