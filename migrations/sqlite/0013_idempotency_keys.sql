-- Idempotency-Key (issue 23): the first answer to a user's key, kept for replay. status is NULL
-- while the first request runs (locked_until is then its lease), 0 once its write committed
-- without an answer that may be kept, and the answer's status after. Pruned by created_at.
CREATE TABLE idempotency_keys (
    user_id INTEGER NOT NULL,
    idem_key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    locked_until INTEGER NOT NULL,
    status INTEGER,
    headers TEXT,
    answer BLOB,
    PRIMARY KEY (user_id, idem_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
