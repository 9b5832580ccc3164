package models_test

import (
	"errors"
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// A verdict recorded inside a transaction (as a moderator's is, with its audit row) commits
// with it, settling the screen job, or is undone with it, leaving the job owed.
func TestRecordScreenInsideATransaction(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		kept := f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, "kept", f.NowMs())
		undone := f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, "undone", f.NowMs())
		screen := func(tx *models.Store, id int64) error {
			ok, err := tx.RecordScreen(f.ctx, models.KindPitch, id, models.VerdictBlock, 1,
				models.Event{Event: models.TaskScreen, Kind: models.KindPitch, ItemID: id, UserID: ann, Outcome: models.OutcomeDecided})
			if err == nil && !ok {
				err = errors.New("not recorded")
			}
			return err
		}
		if err := f.store.WithTx(f.ctx, func(tx *models.Store) error { return screen(tx, kept) }); err != nil {
			t.Fatalf("record a verdict in a transaction: %v", err)
		}
		f.NoJob(models.TaskScreen, models.KindPitch, kept)
		if s, err := f.store.ScreenOf(f.ctx, models.KindPitch, kept); err != nil || s.Verdict == nil || *s.Verdict != models.VerdictBlock {
			t.Fatalf("the committed verdict: %+v, %v", s, err)
		}

		rollback := errors.New("the audit row failed")
		err := f.store.WithTx(f.ctx, func(tx *models.Store) error {
			if err := screen(tx, undone); err != nil {
				return err
			}
			return rollback
		})
		if !errors.Is(err, rollback) {
			t.Fatalf("a transaction that fails after its verdict: %v", err)
		}
		f.MustJob(models.TaskScreen, models.KindPitch, undone)
		if s, err := f.store.ScreenOf(f.ctx, models.KindPitch, undone); err != nil || s.Verdict != nil {
			t.Fatalf("the undone verdict: %+v, %v", s, err)
		}
	})
}

// A recorded score leaves its event (the attempts log the console reads) beside the score, once.
func TestRecordScoreLeavesItsEvent(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		_, rev := f.rawSong(ann, "S", "s")
		if ok, err := f.store.RecordScreen(f.ctx, models.KindRevision, rev, models.VerdictAllow, 1,
			models.Event{Event: models.TaskScreen, Kind: models.KindRevision, ItemID: rev, UserID: ann, Outcome: models.OutcomeAllow}); !ok || err != nil {
			t.Fatal(ok, err)
		}
		sc := models.Score{RevisionID: rev, Art: 0.4, ArtRuns: []float64{0.1, 0.2, 0.9}, Model: "critic", Rubric: "art-v1"}
		ev := models.Event{Event: models.TaskScore, Kind: models.KindRevision, ItemID: rev, UserID: ann, Outcome: models.OutcomeScored}
		for range 2 {
			if _, err := f.store.RecordScore(f.ctx, sc, ev); err != nil {
				t.Fatal(err)
			}
		}
		evs, err := f.store.ListEvents(f.ctx, models.EventFilter{Kind: models.KindRevision, ItemID: rev}, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		var scored int
		for _, e := range evs {
			if e.Event == models.TaskScore && e.Outcome == models.OutcomeScored {
				scored++
			}
		}
		if scored != 1 {
			t.Fatalf("events %+v: %d scored, want the one recorded score's", evs, scored)
		}
	})
}

// The events list pages newest first, a page at most the limit, each page before the last
// event of the one before.
func TestListEventsPagesNewestFirst(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		for i := range 5 {
			id := f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, "p"+string(rune('a'+i)), f.NowMs())
			if ok, err := f.store.RecordScreen(f.ctx, models.KindPitch, id, models.VerdictAllow, 1,
				models.Event{Event: models.TaskScreen, Kind: models.KindPitch, ItemID: id, UserID: ann, Outcome: models.OutcomeAllow}); !ok || err != nil {
				t.Fatal(ok, err)
			}
		}
		var sizes []int
		var ids []int64
		before := int64(0)
		for range 4 {
			page, err := f.store.ListEvents(f.ctx, models.EventFilter{UserID: ann}, before, 2)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(page))
			for _, e := range page {
				ids = append(ids, e.ID)
			}
			if len(page) == 0 {
				break
			}
			before = page[len(page)-1].ID
		}
		if len(sizes) != 4 || sizes[0] != 2 || sizes[1] != 2 || sizes[2] != 1 || sizes[3] != 0 {
			t.Fatalf("pages of 2 over 5 events: sizes %v", sizes)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] >= ids[i-1] {
				t.Fatalf("event ids %v, want newest first with none twice", ids)
			}
		}
	})
}
