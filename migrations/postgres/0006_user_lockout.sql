-- Issue 12: a user can be disabled (locked out: no token or session of theirs works, their owed
-- work stays), and sessions are pruned by user and by age, so both get an index. disabled is an
-- integer 0/1 as songs.public is, so one query text serves both dialects.
ALTER TABLE users ADD COLUMN disabled integer NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1));
CREATE INDEX sessions_user ON sessions (user_id, expires_at);
CREATE INDEX sessions_expires ON sessions (expires_at);
