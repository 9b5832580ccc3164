-- A public song's title is that of its newest allowed revision (a revision's new title is public
-- only once that revision is). It is kept on the song by owed_refresh_song, with public and art,
-- so the public list reads one row per song instead of walking each song's revisions and their
-- verdicts on every request.
ALTER TABLE songs ADD COLUMN public_title text;

CREATE OR REPLACE FUNCTION owed_refresh_song(p_song bigint) RETURNS void LANGUAGE sql AS $$
    UPDATE songs SET
        public = CASE WHEN EXISTS (SELECT 1 FROM revisions r JOIN screens s ON s.kind = 'revision' AND s.item_id = r.id
                                   WHERE r.song_id = p_song AND s.verdict = 'allow') THEN 1 ELSE 0 END,
        public_title = (SELECT r.title FROM revisions r
                        WHERE r.song_id = p_song AND EXISTS (SELECT 1 FROM screens sc
                            WHERE sc.kind = 'revision' AND sc.item_id = r.id AND sc.verdict = 'allow')
                        ORDER BY r.id DESC LIMIT 1),
        art = (SELECT sc.art FROM scores sc JOIN revisions r ON r.id = sc.revision_id
               WHERE r.song_id = p_song ORDER BY r.id DESC LIMIT 1)
    WHERE id = p_song;
$$;

UPDATE songs SET public_title = (SELECT r.title FROM revisions r
    WHERE r.song_id = songs.id AND EXISTS (SELECT 1 FROM screens sc
        WHERE sc.kind = 'revision' AND sc.item_id = r.id AND sc.verdict = 'allow')
    ORDER BY r.id DESC LIMIT 1)
WHERE public = 1;
