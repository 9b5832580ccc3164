package models_test

import (
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// Overturning an allowed revision to block records the new verdict and takes back the score
// job the allow owed; overturning a pitch leaves every score job alone.
func TestOverturnToBlockTakesBackTheRevisionsScoreJob(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		ann := f.User("ann")
		_, rev := f.rawSong(ann, "song", "code")
		f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('revision', ?, 'allow', 0.9)`, rev)
		f.MustJob(models.TaskScore, models.KindRevision, rev)
		// A pitch with the revision's id: its overturn must not touch the revision's job.
		pitch := f.InsertID(`INSERT INTO pitches (id, user_id, body, created_at) VALUES (?, ?, 'p', ?)`, rev, ann, f.NowMs())
		f.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence) VALUES ('pitch', ?, 'allow', 0.9)`, pitch)
		overturn := func(kind models.Kind, id int64) {
			t.Helper()
			block, adminID, confidence := models.VerdictBlock, ann, 1.0
			ev := models.Event{Event: models.TaskScreen, Kind: kind, ItemID: id, UserID: ann, Outcome: models.OutcomeOverturned,
				AdminID: &adminID, Verdict: &block, Confidence: &confidence}
			was, changed, err := f.store.OverturnScreen(f.ctx, kind, id, models.VerdictBlock, ev)
			if err != nil || !changed || was == nil || *was != models.VerdictAllow {
				t.Fatalf("overturn %s %d: was %v, changed %v, err %v", kind, id, was, changed, err)
			}
			if v := f.Count(`SELECT COUNT(*) FROM screens WHERE kind = ? AND item_id = ? AND verdict = 'block'`, kind, id); v != 1 {
				t.Errorf("%s %d: %d block verdicts, want 1", kind, id, v)
			}
		}
		overturn(models.KindPitch, pitch)
		f.MustJob(models.TaskScore, models.KindRevision, rev)
		overturn(models.KindRevision, rev)
		f.NoJob(models.TaskScore, models.KindRevision, rev)
	})
}
