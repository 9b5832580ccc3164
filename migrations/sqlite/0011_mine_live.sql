-- Paging `mine` newest first across kinds (issue 15) reads each kind by (author, created_at, id).
-- On SQLite the one process hears its own writes (package notify), so no trigger is needed.
CREATE INDEX revisions_user_created ON revisions (user_id, created_at, id);
CREATE INDEX comments_user_created ON comments (user_id, created_at, id);
CREATE INDEX pitches_user_created ON pitches (user_id, created_at, id);
