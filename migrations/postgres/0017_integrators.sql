-- User names are unique regardless of case (issue 26): `author=NAME` filters name one user.
-- Existing duplicates keep the oldest as it is; each later one becomes NAME-ID, recorded in
-- user_renames, which owed logs once when this migration is applied.
CREATE TABLE user_renames (
    user_id    bigint NOT NULL,
    old_name   text   NOT NULL,
    new_name   text   NOT NULL,
    renamed_at bigint NOT NULL
);
INSERT INTO user_renames (user_id, old_name, new_name, renamed_at)
SELECT u.id, u.name, u.name || '-' || u.id, owed_now_ms()
FROM users u
WHERE EXISTS (SELECT 1 FROM users o WHERE lower(o.name) = lower(u.name) AND o.id < u.id);
UPDATE users SET name = name || '-' || id WHERE id IN (SELECT user_id FROM user_renames);
CREATE UNIQUE INDEX users_name_folded ON users (lower(name));

-- A webhook's secret rotated in place: the one it replaced, and until when deliveries are
-- still signed with it too (OWED_WEBHOOK_SECRET_OVERLAP after the rotation).
ALTER TABLE webhooks ADD COLUMN previous_secret text;
ALTER TABLE webhooks ADD COLUMN previous_secret_until bigint;
