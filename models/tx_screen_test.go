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
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.user("ann")
		kept := f.insertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, "kept", f.nowMs())
		undone := f.insertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, "undone", f.nowMs())
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
		f.noJob(models.TaskScreen, models.KindPitch, kept)
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
		f.mustJob(models.TaskScreen, models.KindPitch, undone)
		if s, err := f.store.ScreenOf(f.ctx, models.KindPitch, undone); err != nil || s.Verdict != nil {
			t.Fatalf("the undone verdict: %+v, %v", s, err)
		}
	})
}
