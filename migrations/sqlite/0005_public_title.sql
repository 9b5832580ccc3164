-- A public song's title is that of its newest allowed revision (a revision's new title is public
-- only once that revision is). It is kept on the song by the same triggers that keep public and
-- art, so the public list reads one row per song instead of walking each song's revisions and
-- their verdicts on every request.
ALTER TABLE songs ADD COLUMN public_title TEXT;

UPDATE songs SET public_title = (SELECT r.title FROM revisions r
    WHERE r.song_id = songs.id AND EXISTS (SELECT 1 FROM screens sc
        WHERE sc.kind = 'revision' AND sc.item_id = r.id AND sc.verdict = 'allow')
    ORDER BY r.id DESC LIMIT 1)
WHERE public = 1;

DROP TRIGGER screens_settle;
CREATE TRIGGER screens_settle AFTER INSERT ON screens BEGIN
    DELETE FROM content_jobs WHERE task = 'screen' AND kind = NEW.kind AND item_id = NEW.item_id;
    INSERT INTO content_jobs (task, kind, item_id, user_id, due_at)
    SELECT 'score', 'revision', r.id, r.user_id, NEW.screened_at
    FROM revisions r
    WHERE NEW.kind = 'revision' AND NEW.verdict = 'allow' AND r.id = NEW.item_id
      AND NOT EXISTS (SELECT 1 FROM scores s WHERE s.revision_id = r.id)
    ON CONFLICT (task, kind, item_id) DO NOTHING;
    UPDATE songs SET
        public = EXISTS (SELECT 1 FROM revisions r JOIN screens s ON s.kind = 'revision' AND s.item_id = r.id
                         WHERE r.song_id = songs.id AND s.verdict = 'allow'),
        public_title = (SELECT r.title FROM revisions r
                        WHERE r.song_id = songs.id AND EXISTS (SELECT 1 FROM screens sc
                            WHERE sc.kind = 'revision' AND sc.item_id = r.id AND sc.verdict = 'allow')
                        ORDER BY r.id DESC LIMIT 1),
        art = (SELECT sc.art FROM scores sc JOIN revisions r ON r.id = sc.revision_id
               WHERE r.song_id = songs.id ORDER BY r.id DESC LIMIT 1)
    WHERE NEW.kind = 'revision' AND id = (SELECT song_id FROM revisions WHERE id = NEW.item_id);
END;

DROP TRIGGER revisions_forget;
CREATE TRIGGER revisions_forget AFTER DELETE ON revisions BEGIN
    DELETE FROM content_jobs WHERE kind = 'revision' AND item_id = OLD.id;
    DELETE FROM screens WHERE kind = 'revision' AND item_id = OLD.id;
    UPDATE songs SET
        public = EXISTS (SELECT 1 FROM revisions r JOIN screens s ON s.kind = 'revision' AND s.item_id = r.id
                         WHERE r.song_id = songs.id AND s.verdict = 'allow'),
        public_title = (SELECT r.title FROM revisions r
                        WHERE r.song_id = songs.id AND EXISTS (SELECT 1 FROM screens sc
                            WHERE sc.kind = 'revision' AND sc.item_id = r.id AND sc.verdict = 'allow')
                        ORDER BY r.id DESC LIMIT 1),
        art = (SELECT sc.art FROM scores sc JOIN revisions r ON r.id = sc.revision_id
               WHERE r.song_id = songs.id ORDER BY r.id DESC LIMIT 1)
    WHERE id = OLD.song_id;
END;
