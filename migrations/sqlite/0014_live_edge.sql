-- Issue 22: stream tickets, for EventSource (which cannot send Authorization). A ticket is kept
-- only as its hash, valid until expires_at and used once, bound to its user and to the
-- credential that asked for it (its kind and hash), so a rotation, a sign-out or a disable voids
-- it. In the database rather than in memory, so a ticket one replica gave works on every replica.
CREATE TABLE stream_tickets (
    id_hash    TEXT    PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    cred_kind  TEXT    NOT NULL CHECK (cred_kind IN ('token', 'session')),
    cred_hash  TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX stream_tickets_expires ON stream_tickets (expires_at);
