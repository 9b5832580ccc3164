-- Issue 22: stream tickets, for EventSource (which cannot send Authorization). A ticket is kept
-- only as its hash, valid until expires_at and used once, bound to its user and to the
-- credential that asked for it (its kind and hash), so a rotation, a sign-out or a disable voids
-- it. In the database rather than in memory, so a ticket one replica gave works on every replica.
CREATE TABLE stream_tickets (
    id_hash    text   PRIMARY KEY,
    user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    cred_kind  text   NOT NULL CHECK (cred_kind IN ('token', 'session')),
    cred_hash  text   NOT NULL,
    expires_at bigint NOT NULL
);
CREATE INDEX stream_tickets_expires ON stream_tickets (expires_at);

-- Revocation reaches held streams and long polls on every replica: a token rotation, a disable
-- or enable, and a session's end (sign-out, rotation, disable, pruning) wake the user's waiters
-- (channel owed_mine, migration 0011), which then check their credential again.
CREATE TRIGGER users_revoke_notify AFTER UPDATE ON users FOR EACH ROW
    WHEN (OLD.token_hash IS DISTINCT FROM NEW.token_hash OR OLD.disabled IS DISTINCT FROM NEW.disabled)
    EXECUTE FUNCTION owed_mine_notify_user();
CREATE TRIGGER sessions_revoke_notify AFTER DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION owed_mine_notify();
