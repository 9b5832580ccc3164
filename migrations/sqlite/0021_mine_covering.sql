-- The author's view (`mine`, issue 25) reads its page from indexes alone: an author's items lie
-- scattered through their tables (ids are shared by every author), so each item read through
-- (user_id, created_at, id) cost a random visit to its row, and each verdict one to the screens
-- row behind its key. The items' indexes now carry the columns the view shows, and the verdict
-- has an index of its own beside the key's.
DROP INDEX revisions_user_created;
CREATE INDEX revisions_user_created ON revisions (user_id, created_at, id, song_id, title);
DROP INDEX comments_user_created;
CREATE INDEX comments_user_created ON comments (user_id, created_at, id, song_id);
CREATE INDEX screens_verdict ON screens (kind, item_id, verdict, confidence);
