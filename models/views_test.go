package models_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// publicSong makes a song with one allowed revision, scored with art unless art is nil.
func (f *fixture) publicSong(userID int64, title string, art *float64) int64 {
	f.t.Helper()
	song, rev := f.rawSong(userID, title, "code")
	f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('revision', ?, 'allow', 0.9)`, rev)
	if art != nil {
		f.Exec(`INSERT INTO scores (revision_id, song_id, art, art_runs, criteria, model, rubric)
			VALUES (?, ?, ?, '[]', '{}', 'critic', 'art-v1')`, rev, song, *art)
	}
	return song
}

// Public songs sort by art, best first and unscored last, and page without gaps or repeats
// through ties and the unscored tail; pending and blocked songs are never listed.
func TestPublicSongsByArtWithCursor(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		low := f.publicSong(ann, "low", ptr(0.2))
		none1 := f.publicSong(ann, "none1", nil)
		high := f.publicSong(ann, "high", ptr(0.9))
		tieA := f.publicSong(ann, "tieA", ptr(0.5))
		none2 := f.publicSong(ann, "none2", nil)
		tieB := f.publicSong(ann, "tieB", ptr(0.5))
		f.rawSong(ann, "pending", "code")
		_, blocked := f.rawSong(ann, "blocked", "code")
		f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('revision', ?, 'block', 0.9)`, blocked)

		want := []int64{high, tieB, tieA, low, none2, none1}
		for _, size := range []int{1, 2, 4, 10} {
			var got []int64
			var after *models.SongCursor
			for page := 0; page < 10; page++ {
				songs, err := f.store.PublicSongs(f.ctx, true, after, size)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range songs {
					got = append(got, s.ID)
				}
				if len(songs) < size {
					break
				}
				last := songs[len(songs)-1]
				after = &models.SongCursor{Art: last.Art, ID: last.ID}
			}
			if !slices.Equal(got, want) {
				t.Errorf("by art, pages of %d: %v, want %v", size, got, want)
			}
		}
		newest, err := f.store.PublicSongs(f.ctx, false, &models.SongCursor{ID: none2}, 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, s := range newest {
			ids = append(ids, s.ID)
		}
		if w := []int64{tieA, high, none1, low}; !slices.Equal(ids, w) {
			t.Errorf("newest first after none2: %v, want %v", ids, w)
		}
	})
}

// A public song shows only its allowed revisions and comments, with scores; pitches likewise.
func TestPublicSongAndPitchesShowOnlyAllowed(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		now := f.NowMs()
		song, r1 := f.rawSong(ann, "S", "v1")
		r2 := f.rawRevision(ann, song, "S", "v2")
		f.rawRevision(ann, song, "S", "v3") // pending: not shown
		f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('revision', ?, 'allow', 0.9)`, r1)
		f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('revision', ?, 'block', 0.9)`, r2)
		f.Exec(`INSERT INTO scores (revision_id, song_id, art, art_runs, criteria, model, rubric)
			VALUES (?, ?, 0.7, '[0.6,0.7,0.8]', '{"melody":0.4}', 'critic', 'art-v1')`, r1, song)
		c1 := f.InsertID(`INSERT INTO comments (song_id, user_id, body, created_at) VALUES (?, ?, 'ok', ?)`, song, ann, now)
		c2 := f.InsertID(`INSERT INTO comments (song_id, user_id, body, created_at) VALUES (?, ?, 'bad', ?)`, song, ann, now)
		f.InsertID(`INSERT INTO comments (song_id, user_id, body, created_at) VALUES (?, ?, 'pending', ?)`, song, ann, now)
		f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('comment', ?, 'allow', 0.9)`, c1)
		f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('comment', ?, 'block', 0.9)`, c2)

		s, revs, comments, err := f.store.PublicSong(f.ctx, song)
		if err != nil {
			t.Fatal(err)
		}
		if s.Art == nil || *s.Art != 0.7 || len(revs) != 1 || revs[0].ID != r1 || len(comments) != 1 || comments[0].ID != c1 {
			t.Fatalf("public song = %+v, revisions %+v, comments %+v; want r1 and c1 only", s, revs, comments)
		}
		sc := revs[0].Score
		if sc == nil || sc.Art != 0.7 || !slices.Equal(sc.ArtRuns, []float64{0.6, 0.7, 0.8}) || sc.Criteria["melody"] != 0.4 || sc.Model != "critic" || sc.Rubric != "art-v1" {
			t.Errorf("r1 score = %+v", sc)
		}

		pendingSong, _ := f.rawSong(ann, "P", "v")
		if _, _, _, err := f.store.PublicSong(f.ctx, pendingSong); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("pending song: %v, want not found", err)
		}

		var pitches []int64
		for _, v := range []string{"allow", "block", "", "allow"} {
			id := f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, "p", now)
			if v != "" {
				f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('pitch', ?, ?, 0.9)`, id, v)
			}
			pitches = append(pitches, id)
		}
		got, err := f.store.PublicPitches(f.ctx, 0, 10)
		if err != nil || len(got) != 2 || got[0].ID != pitches[3] || got[1].ID != pitches[0] {
			t.Fatalf("public pitches = %+v, %v; want the allowed two, newest first", got, err)
		}
		page2, _ := f.store.PublicPitches(f.ctx, pitches[3], 10)
		if len(page2) != 1 || page2[0].ID != pitches[0] {
			t.Errorf("pitches before %d = %+v", pitches[3], page2)
		}
	})
}

// An author's view holds their own items only, each with its verdict, score and owed jobs.
func TestMine(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann, bob := f.User("ann"), f.User("bob")
		song, rev, _ := f.store.CreateSong(f.ctx, ann, "S", "v1")
		f.store.RecordScreen(f.ctx, models.KindRevision, rev.ID, models.VerdictAllow, 0.8, models.Event{Event: "screen", Outcome: "allow"})
		f.store.RecordScore(f.ctx, models.Score{RevisionID: rev.ID, Art: 0.6, ArtRuns: []float64{0.5, 0.6, 0.7},
			Criteria: map[string]float64{"melody": 0.3}, Model: "critic", Rubric: "art-v1"}, models.Event{Event: "score", Outcome: "scored"})
		rev2, _ := f.store.CreateRevision(f.ctx, ann, song.ID, "", "v2")
		f.store.RecordScreen(f.ctx, models.KindRevision, rev2.ID, models.VerdictAllow, 0.8, models.Event{Event: "screen", Outcome: "allow"})
		c, _ := f.store.CreateComment(f.ctx, ann, song.ID, "hi")
		p, _ := f.store.CreatePitch(f.ctx, ann, "pitch")
		f.store.RecordScreen(f.ctx, models.KindPitch, p.ID, models.VerdictBlock, 0.95, models.Event{Event: "screen", Outcome: "block"})
		f.store.CreatePitch(f.ctx, bob, "bob's")

		items, err := f.store.Mine(f.ctx, ann)
		if err != nil {
			t.Fatal(err)
		}
		type key struct {
			kind models.Kind
			id   int64
		}
		byKey := map[key]models.MineItem{}
		for _, it := range items {
			byKey[key{it.Kind, it.ID}] = it
		}
		if len(items) != 4 {
			t.Fatalf("mine = %d items, want ann's 4: %+v", len(items), items)
		}
		scored := byKey[key{models.KindRevision, rev.ID}]
		if scored.Verdict == nil || *scored.Verdict != "allow" || scored.Score == nil || scored.Score.Art != 0.6 || len(scored.Jobs) != 0 {
			t.Errorf("scored revision = %+v", scored)
		}
		waiting := byKey[key{models.KindRevision, rev2.ID}]
		if waiting.Score != nil || len(waiting.Jobs) != 1 || waiting.Jobs[0].Task != models.TaskScore {
			t.Errorf("allowed unscored revision = %+v, want its score job", waiting)
		}
		pending := byKey[key{models.KindComment, c.ID}]
		if pending.Verdict != nil || len(pending.Jobs) != 1 || pending.Jobs[0].Task != models.TaskScreen || pending.SongID == nil || *pending.SongID != song.ID {
			t.Errorf("pending comment = %+v", pending)
		}
		blocked := byKey[key{models.KindPitch, p.ID}]
		if blocked.Verdict == nil || *blocked.Verdict != "block" || *blocked.Confidence != 0.95 || len(blocked.Jobs) != 0 {
			t.Errorf("blocked pitch = %+v", blocked)
		}
	})
}

// Stats count the owed work by task, why and state; events list newest first with filters.
func TestStatsAndEvents(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		f.bulkPitches(ann, 4)
		jobs, _ := f.store.ClaimDue(f.ctx, 2, lease, "w", 0)
		up := 503
		f.store.Reschedule(f.ctx, jobs[0], f.clk.Now().Add(time.Minute), models.WhyUpstream, &up,
			models.Event{Event: "screen", Kind: models.KindPitch, ItemID: jobs[0].ItemID, UserID: ann, Outcome: "pending", Why: ptr(models.WhyUpstream), Status: &up})
		f.clk.Advance(time.Minute + time.Second)
		f.store.RecordScreen(f.ctx, models.KindPitch, jobs[1].ItemID, models.VerdictAllow, 0.9,
			models.Event{Event: "screen", Kind: models.KindPitch, ItemID: jobs[1].ItemID, UserID: ann, Outcome: "allow", Confidence: ptr(0.9)})

		st, err := f.store.Stats(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		// 3 jobs left: one rescheduled (upstream, now due again), two fresh and due.
		if st.Total != 3 || st.Due != 3 || st.Leased != 0 || st.ByWhy[models.WhyUpstream] != 1 || st.ByWhy["none"] != 2 || st.ByTask[models.TaskScreen] != 3 {
			t.Errorf("stats = %+v", st)
		}
		if st.OldestDueAt == nil || st.OldestDueAt.UnixMilli() != ms(owedtest.Start) {
			t.Errorf("oldest due = %v, want %d", st.OldestDueAt, ms(owedtest.Start))
		}

		evs, err := f.store.ListEvents(f.ctx, models.EventFilter{}, 0, 10)
		if err != nil || len(evs) != 2 || evs[0].Outcome != "allow" || evs[1].Outcome != "pending" {
			t.Fatalf("events = %+v, %v; want newest first", evs, err)
		}
		if evs[1].At.UnixMilli() != ms(owedtest.Start) || *evs[1].Status != 503 || evs[0].At.UnixMilli() != ms(owedtest.Start.Add(time.Minute+time.Second)) {
			t.Errorf("event times/status = %+v", evs)
		}
		if got, _ := f.store.ListEvents(f.ctx, models.EventFilter{Why: models.WhyUpstream}, 0, 10); len(got) != 1 || got[0].ID != evs[1].ID {
			t.Errorf("why filter = %+v", got)
		}
		if got, _ := f.store.ListEvents(f.ctx, models.EventFilter{}, evs[0].ID, 10); len(got) != 1 || got[0].ID != evs[1].ID {
			t.Errorf("page before %d = %+v", evs[0].ID, got)
		}

		per, err := f.store.SettledPerMinute(f.ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(per) != 3 || per[1].Put != 1 || per[2].Screen != 1 || per[0].Put+per[0].Screen != 0 {
			t.Errorf("settled per minute = %+v", per)
		}
		// The three minutes are the last three, oldest first, the current one last.
		thisMinute := f.clk.Now().Truncate(time.Minute)
		for i, p := range per {
			if want := thisMinute.Add(time.Duration(i-2) * time.Minute); !p.Minute.Equal(want) {
				t.Errorf("minute %d = %v, want %v", i, p.Minute, want)
			}
		}
	})
}

// A public song is shown under its newest allowed revision's title, not its first one's and
// not a pending one's.
func TestPublicSongTakesTheNewestAllowedTitle(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		song, r1 := f.rawSong(ann, "First", "v1")
		r2 := f.rawRevision(ann, song, "Renamed", "v2")
		f.rawRevision(ann, song, "Pending", "v3")
		for _, r := range []int64{r1, r2} {
			f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('revision', ?, 'allow', 0.9)`, r)
		}
		s, revs, _, err := f.store.PublicSong(f.ctx, song)
		if err != nil || s.Title != "Renamed" || len(revs) != 2 {
			t.Errorf("public song = %+v with %d revisions, %v; want titled Renamed, 2 revisions", s, len(revs), err)
		}
	})
}

// Each attempt counts in its own minute of the window: a score, a put-off and a screen in the
// first, second and third; attempts stamped after the current minute (another replica's clock
// ahead) are left out, not out of range.
func TestSettledPerMinuteCountsEachMinute(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		minute := f.clk.Now().Truncate(time.Minute)
		at := func(d time.Duration, event, outcome string) {
			f.Exec(`INSERT INTO events (at, event, kind, item_id, user_id, outcome, attempt) VALUES (?, ?, 'pitch', 1, ?, ?, 1)`,
				minute.Add(d).UnixMilli(), event, ann, outcome)
		}
		at(-3*time.Minute, "screen", "allow") // before the window
		at(-2*time.Minute, "score", "scored")
		at(-2*time.Minute+59*time.Second, "score", "scored")
		at(-time.Minute, "screen", "pending")
		at(0, "screen", "allow")
		at(time.Minute, "screen", "allow") // after the current minute
		per, err := f.store.SettledPerMinute(f.ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		want := []models.Settled{{Minute: minute.Add(-2 * time.Minute), Score: 2}, {Minute: minute.Add(-time.Minute), Put: 1}, {Minute: minute, Screen: 1}}
		if len(per) != 3 {
			t.Fatalf("settled per minute = %+v, want 3 minutes", per)
		}
		for i := range want {
			if got := per[i]; !got.Minute.Equal(want[i].Minute) || got.Score != want[i].Score || got.Put != want[i].Put || got.Screen != want[i].Screen {
				t.Errorf("minute %d = %+v, want %+v", i, got, want[i])
			}
		}
	})
}

// ScreenOf says where an item's screening stands: its owed job while it is pending, nothing for
// an item that does not exist.
func TestScreenOfPendingAndMissing(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		p, err := f.store.CreatePitch(f.ctx, f.User("ann"), "p")
		if err != nil {
			t.Fatal(err)
		}
		if s, err := f.store.ScreenOf(f.ctx, models.KindPitch, p.ID); err != nil || s.Verdict != nil || s.Job == nil || s.Job.ItemID != p.ID {
			t.Errorf("a pending pitch: %+v, %v; want its screen job", s, err)
		}
		if s, err := f.store.ScreenOf(f.ctx, models.KindPitch, p.ID+1000); err != nil || s.Verdict != nil || s.Job != nil {
			t.Errorf("a missing pitch: %+v, %v; want nothing", s, err)
		}
	})
}
