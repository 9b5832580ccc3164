-- The author's view (`mine`, issue 25) reads its items from indexes alone (an index-only scan
-- once the visibility map has the pages): an author's items lie scattered through their tables,
-- so each item read through (user_id, created_at, id) cost a random visit to its row. The
-- verdicts keep their key alone here: screens takes a row per screening, and every index on it
-- is paid by the queue's record path (SQLite's twin adds one; its writes are not the bottleneck).
DROP INDEX revisions_user_created;
CREATE INDEX revisions_user_created ON revisions (user_id, created_at, id) INCLUDE (song_id, title);
DROP INDEX comments_user_created;
CREATE INDEX comments_user_created ON comments (user_id, created_at, id) INCLUDE (song_id);
