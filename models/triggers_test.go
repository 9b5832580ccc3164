package models_test

import (
	"errors"
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// Any writer of an item, raw SQL included, owes its screening: the triggers make the job.
func TestTriggersRawInsertsOweScreens(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		now := f.NowMs()

		songID, revID := f.rawSong(ann, "Tide", `s("bd sd")`)
		commentID := f.InsertID(`INSERT INTO comments (song_id, user_id, body, created_at) VALUES (?, ?, ?, ?)`, songID, ann, "nice", now)
		pitchID := f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, "a pitch", now)
		for _, it := range []struct {
			kind models.Kind
			id   int64
		}{{models.KindRevision, revID}, {models.KindComment, commentID}, {models.KindPitch, pitchID}} {
			j := f.MustJob(models.TaskScreen, it.kind, it.id)
			if j.UserID != ann || j.DueAt.UnixMilli() != now || j.Attempts != 0 || j.Why != nil || j.Status != nil || j.LeaseUntil != nil || j.LeaseOwner != nil {
				t.Errorf("%s job = %+v, want ann's, due at %d, no attempts, why, status or lease", it.kind, j, now)
			}
			f.NoJob(models.TaskScore, it.kind, it.id)
		}

		// A raw insert that leaves created_at to the database still owes a job, due when written.
		bare := f.InsertID(`INSERT INTO pitches (user_id, body) VALUES (?, ?)`, ann, "no time given")
		var created int64
		if err := f.store.RawScan(f.ctx, &created, `SELECT created_at FROM pitches WHERE id = ?`, bare); err != nil {
			t.Fatal(err)
		}
		if j := f.MustJob(models.TaskScreen, models.KindPitch, bare); j.DueAt.UnixMilli() != created || created == 0 {
			t.Errorf("bare pitch job due %d, want its created_at %d", j.DueAt.UnixMilli(), created)
		}

		// One statement writing many rows owes one job per row.
		before := f.CountJobs()
		n := f.Exec(`INSERT INTO pitches (user_id, body, created_at)
			SELECT ?, 'bulk', ? FROM revisions r1 CROSS JOIN (SELECT 1 AS a UNION ALL SELECT 2 UNION ALL SELECT 3) x`, ann, now)
		if n != 3 {
			t.Fatalf("bulk insert wrote %d rows, want 3", n)
		}
		if got := f.CountJobs(); got != before+3 {
			t.Errorf("jobs after a 3-row insert = %d, want %d", got, before+3)
		}
	})
}

// The store's own writes owe the same jobs, due at the store's clock, in the write's transaction.
func TestTriggersStoreWritesOweScreens(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		song, rev, err := f.store.CreateSong(f.ctx, ann, "Tide", "code")
		if err != nil {
			t.Fatal(err)
		}
		rev2, err := f.store.CreateRevision(f.ctx, ann, song.ID, "", "code 2")
		if err != nil {
			t.Fatal(err)
		}
		c, err := f.store.CreateComment(f.ctx, ann, song.ID, "mine")
		if err != nil {
			t.Fatal(err)
		}
		p, err := f.store.CreatePitch(f.ctx, ann, "pitch")
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range []struct {
			kind models.Kind
			id   int64
		}{{models.KindRevision, rev.ID}, {models.KindRevision, rev2.ID}, {models.KindComment, c.ID}, {models.KindPitch, p.ID}} {
			if j := f.MustJob(models.TaskScreen, it.kind, it.id); j.DueAt.UnixMilli() != f.NowMs() || j.UserID != ann {
				t.Errorf("%s %d job = %+v, want ann's due now (%d)", it.kind, it.id, j, f.NowMs())
			}
		}

		// A write that rolls back takes its job with it.
		boom := errors.New("boom")
		var lost int64
		err = f.store.WithTx(f.ctx, func(tx *models.Store) error {
			p, err := tx.CreatePitch(f.ctx, ann, "rolled back")
			lost = p.ID
			if err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("tx err = %v", err)
		}
		f.NoJob(models.TaskScreen, models.KindPitch, lost)
		if got := f.CountJobs(); got != 4 {
			t.Errorf("jobs = %d, want the 4 committed items' only", got)
		}
	})
}

// A verdict settles the screening; an allowed revision (only) then owes its score, and its song
// becomes public.
func TestTriggersVerdictSettlesScreen(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		now := f.NowMs()
		allowedSong, allowedRev := f.rawSong(ann, "A", "a")
		blockedSong, blockedRev := f.rawSong(ann, "B", "b")
		comment := f.InsertID(`INSERT INTO comments (song_id, user_id, body, created_at) VALUES (?, ?, ?, ?)`, allowedSong, ann, "c", now)
		pitch := f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, "p", now)

		// Raw verdicts, as any writer could record them.
		screenedAt := now + 1234
		f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence, screened_at) VALUES ('revision', ?, 'allow', 0.9, ?)`, allowedRev, screenedAt)
		f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence, screened_at) VALUES ('revision', ?, 'block', 0.8, ?)`, blockedRev, screenedAt)
		f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence, screened_at) VALUES ('comment', ?, 'allow', 0.9, ?)`, comment, screenedAt)

		f.NoJob(models.TaskScreen, models.KindRevision, allowedRev)
		score := f.MustJob(models.TaskScore, models.KindRevision, allowedRev)
		if score.UserID != ann || score.DueAt.UnixMilli() != screenedAt || score.Attempts != 0 || score.Why != nil {
			t.Errorf("score job = %+v, want ann's, due at the verdict (%d), fresh", score, screenedAt)
		}
		f.NoJob(models.TaskScreen, models.KindRevision, blockedRev)
		f.NoJob(models.TaskScore, models.KindRevision, blockedRev) // a blocked revision is never scored
		f.NoJob(models.TaskScreen, models.KindComment, comment)
		f.NoJob(models.TaskScore, models.KindComment, comment) // only revisions are scored
		f.MustJob(models.TaskScreen, models.KindPitch, pitch)  // untouched

		if s := f.song(allowedSong); s.Public != 1 || s.Art != nil {
			t.Errorf("allowed song = %+v, want public, unscored", s)
		}
		if s := f.song(blockedSong); s.Public != 0 {
			t.Errorf("blocked song = %+v, want not public", s)
		}

		// The store's RecordScreen goes through the same triggers, once only.
		f.clk.Advance(5000)
		ok, err := f.store.RecordScreen(f.ctx, models.KindPitch, pitch, models.VerdictBlock, 0.7,
			models.Event{Event: "screen", Kind: models.KindPitch, ItemID: pitch, UserID: ann, Outcome: "block"})
		if err != nil || !ok {
			t.Fatalf("record screen = %v, %v", ok, err)
		}
		f.NoJob(models.TaskScreen, models.KindPitch, pitch)
		again, err := f.store.RecordScreen(f.ctx, models.KindPitch, pitch, models.VerdictAllow, 0.9,
			models.Event{Event: "screen", Kind: models.KindPitch, ItemID: pitch, UserID: ann, Outcome: "allow"})
		if err != nil || again {
			t.Errorf("second verdict recorded = %v, %v; want refused", again, err)
		}
		evs, _ := f.store.ListEvents(f.ctx, models.EventFilter{ItemID: pitch, Kind: models.KindPitch}, 0, 10)
		if len(evs) != 1 || evs[0].Outcome != "block" {
			t.Errorf("events = %+v, want the one recorded verdict", evs)
		}

		// RecordScreen of an allowed revision through the store owes the score at the store's clock.
		_, rev3 := f.rawSong(ann, "C", "c")
		if ok, err := f.store.RecordScreen(f.ctx, models.KindRevision, rev3, models.VerdictAllow, 0.9,
			models.Event{Event: "screen", Kind: models.KindRevision, ItemID: rev3, UserID: ann, Outcome: "allow"}); !ok || err != nil {
			t.Fatalf("record = %v, %v", ok, err)
		}
		if j := f.MustJob(models.TaskScore, models.KindRevision, rev3); j.DueAt.UnixMilli() != f.NowMs() {
			t.Errorf("score job due %d, want now %d", j.DueAt.UnixMilli(), f.NowMs())
		}
	})
}

// A recorded score settles the score job and becomes the song's art.
func TestTriggersScoreSettlesScore(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		song, rev := f.rawSong(ann, "A", "a")
		f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('revision', ?, 'allow', 0.9)`, rev)
		f.MustJob(models.TaskScore, models.KindRevision, rev)
		f.Exec(`INSERT INTO scores (revision_id, song_id, art, art_runs, criteria, model, rubric)
			VALUES (?, ?, 0.625, '[0.5,0.625,0.75]', '{}', 'critic', 'art-v1')`, rev, song)
		f.NoJob(models.TaskScore, models.KindRevision, rev)
		if got := f.CountJobs(); got != 0 {
			t.Errorf("jobs = %d, want none", got)
		}
		if s := f.song(song); s.Art == nil || *s.Art != 0.625 || s.Public != 1 {
			t.Errorf("song = %+v, want public with art 0.625", s)
		}

		// Through the store: the score job goes, and nothing is recorded twice.
		_, rev2 := f.rawSong(ann, "B", "b")
		if ok, err := f.store.RecordScreen(f.ctx, models.KindRevision, rev2, models.VerdictAllow, 1, models.Event{Event: "screen", Outcome: "allow"}); !ok || err != nil {
			t.Fatal(ok, err)
		}
		sc := models.Score{RevisionID: rev2, Art: 0.4, ArtRuns: []float64{0.3, 0.4, 0.5}, Criteria: map[string]float64{"melody": 0.2}, Model: "critic", Rubric: "art-v1"}
		if ok, err := f.store.RecordScore(f.ctx, sc, models.Event{Event: "score", Outcome: "scored"}); !ok || err != nil {
			t.Fatalf("record score = %v, %v", ok, err)
		}
		f.NoJob(models.TaskScore, models.KindRevision, rev2)
		if ok, err := f.store.RecordScore(f.ctx, sc, models.Event{Event: "score", Outcome: "scored"}); ok || err != nil {
			t.Errorf("second score recorded = %v, %v; want refused", ok, err)
		}
	})
}

// A song's art is its newest scored allowed revision's, kept right through scores arriving out
// of order and revisions being deleted; it is public while any revision is allowed.
func TestTriggersSongPublicAndArt(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		song, r1 := f.rawSong(ann, "S", "v1")
		r2 := f.rawRevision(ann, song, "S", "v2")
		r3 := f.rawRevision(ann, song, "S", "v3")
		verdict := func(rev int64, v models.Verdict) {
			f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('revision', ?, ?, 0.9)`, rev, v)
		}
		score := func(rev int64, art float64) {
			f.Exec(`INSERT INTO scores (revision_id, song_id, art, art_runs, criteria, model, rubric)
				VALUES (?, ?, ?, '[]', '{}', 'critic', 'art-v1')`, rev, song, art)
		}
		want := func(step string, public int, art *float64) {
			t.Helper()
			s := f.song(song)
			if s.Public != public || (art == nil) != (s.Art == nil) || (art != nil && *s.Art != *art) {
				t.Errorf("%s: song public=%d art=%v, want public=%d art=%v", step, s.Public, deref(s.Art), public, deref(art))
			}
		}

		want("nothing screened", 0, nil)
		verdict(r3, models.VerdictBlock)
		want("only a blocked revision", 0, nil)
		verdict(r1, models.VerdictAllow)
		want("r1 allowed, unscored", 1, nil)
		verdict(r2, models.VerdictAllow)
		score(r2, 0.8)
		want("r2 scored", 1, ptr(0.8))
		score(r1, 0.3) // an older revision's score arriving late does not replace the newest's
		want("r1 scored after r2", 1, ptr(0.8))

		f.Exec(`DELETE FROM revisions WHERE id = ?`, r2)
		want("r2 deleted", 1, ptr(0.3))
		f.Exec(`DELETE FROM revisions WHERE id = ?`, r1)
		want("only the blocked r3 left", 0, nil)

		// A newer allowed revision not yet scored keeps the newest scored one's art.
		r4 := f.rawRevision(ann, song, "S", "v4")
		verdict(r4, models.VerdictAllow)
		score(r4, 0.55)
		r5 := f.rawRevision(ann, song, "S", "v5")
		verdict(r5, models.VerdictAllow)
		want("r5 allowed, unscored", 1, ptr(0.55))
	})
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// Deleting an item, by raw SQL or through the store, deletes its owed jobs; deleting a song
// deletes its revisions' and comments' jobs.
func TestTriggersDeleteTakesJobs(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		bob := f.User("bob")
		now := f.NowMs()

		// Raw deletes.
		song, rev := f.rawSong(ann, "A", "a")
		scoredRev := f.rawRevision(ann, song, "A", "b")
		f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('revision', ?, 'allow', 0.9)`, scoredRev)
		f.MustJob(models.TaskScore, models.KindRevision, scoredRev)
		comment := f.InsertID(`INSERT INTO comments (song_id, user_id, body, created_at) VALUES (?, ?, ?, ?)`, song, ann, "c", now)
		pitch := f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, "p", now)
		bobPitch := f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, bob, "p", now)

		f.Exec(`DELETE FROM revisions WHERE id = ?`, rev)
		f.NoJob(models.TaskScreen, models.KindRevision, rev)
		f.Exec(`DELETE FROM revisions WHERE id = ?`, scoredRev)
		f.NoJob(models.TaskScore, models.KindRevision, scoredRev)
		f.Exec(`DELETE FROM comments WHERE id = ?`, comment)
		f.NoJob(models.TaskScreen, models.KindComment, comment)
		f.Exec(`DELETE FROM pitches WHERE id = ?`, pitch)
		f.NoJob(models.TaskScreen, models.KindPitch, pitch)
		f.MustJob(models.TaskScreen, models.KindPitch, bobPitch) // someone else's work stays owed

		// A song's delete cascades to its revisions and comments, and their jobs go too.
		song2, r21 := f.rawSong(ann, "B", "a")
		r22 := f.rawRevision(ann, song2, "B", "b")
		f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('revision', ?, 'allow', 0.9)`, r22)
		c2 := f.InsertID(`INSERT INTO comments (song_id, user_id, body, created_at) VALUES (?, ?, ?, ?)`, song2, bob, "c", now)
		f.Exec(`DELETE FROM songs WHERE id = ?`, song2)
		if jobs := append(f.Jobs(models.KindRevision, r21), append(f.Jobs(models.KindRevision, r22), f.Jobs(models.KindComment, c2)...)...); len(jobs) != 0 {
			t.Errorf("jobs left after the song's delete: %+v", jobs)
		}
		if got := f.CountJobs(); got != 1 {
			t.Errorf("jobs = %d, want bob's pitch only", got)
		}

		// Through the store, by kind, and by song.
		s3, err := f.createSong(ann)
		if err != nil {
			t.Fatal(err)
		}
		r32, _ := f.store.CreateRevision(f.ctx, ann, s3.song, "", "v2")
		c3, _ := f.store.CreateComment(f.ctx, ann, s3.song, "hi")
		p3, _ := f.store.CreatePitch(f.ctx, ann, "pitch")
		if err := f.store.DeleteItem(f.ctx, bob, models.KindPitch, p3.ID); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("bob deleting ann's pitch: %v, want not found (as if missing)", err)
		}
		f.MustJob(models.TaskScreen, models.KindPitch, p3.ID)
		for _, d := range []struct {
			kind models.Kind
			id   int64
		}{{models.KindPitch, p3.ID}, {models.KindComment, c3.ID}, {models.KindRevision, r32.ID}} {
			if err := f.store.DeleteItem(f.ctx, ann, d.kind, d.id); err != nil {
				t.Fatalf("delete %s: %v", d.kind, err)
			}
			if jobs := f.Jobs(d.kind, d.id); len(jobs) != 0 {
				t.Errorf("%s deleted, jobs left: %+v", d.kind, jobs)
			}
		}
		if err := f.store.DeleteItem(f.ctx, ann, "song", s3.song); err != nil {
			t.Fatal(err)
		}
		f.NoJob(models.TaskScreen, models.KindRevision, s3.rev)
		if _, err := f.store.SongByID(f.ctx, s3.song); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("song after delete: %v", err)
		}

		// Deleting a song's last revision deletes the song.
		s4, _ := f.createSong(ann)
		if err := f.store.DeleteItem(f.ctx, ann, models.KindRevision, s4.rev); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.SongByID(f.ctx, s4.song); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("song without revisions: %v, want gone", err)
		}
		if got := f.CountJobs(); got != 1 {
			t.Errorf("jobs = %d, want bob's pitch only", got)
		}
	})
}

type songIDs struct{ song, rev int64 }

func (f *fixture) createSong(userID int64) (songIDs, error) {
	s, r, err := f.store.CreateSong(f.ctx, userID, "T", "code")
	return songIDs{s.ID, r.ID}, err
}
