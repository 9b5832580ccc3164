package models_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestDoneJobsAreTheirSettlingEvents: a settled job is listed from the event that settled it,
// under the job's own id, its task's outcome and the attempt; an event naming no job (written
// before events named theirs) lists nothing; the events' own retention prunes them.
func TestDoneJobsAreTheirSettlingEvents(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		_, rev := f.rawSong(ann, "Tide", `s("bd")`)
		screen := f.MustJob(models.TaskScreen, models.KindRevision, rev)
		ev := models.Event{Event: models.TaskScreen, Kind: models.KindRevision, ItemID: rev, UserID: ann, Outcome: models.OutcomeAllow,
			Attempt: 2, Confidence: ptr(0.9), JobID: &screen.ID}
		if ok, err := f.store.RecordScreen(f.ctx, models.KindRevision, rev, models.VerdictAllow, 0.9, ev); err != nil || !ok {
			t.Fatalf("record the screen: %v %v", ok, err)
		}
		score := f.MustJob(models.TaskScore, models.KindRevision, rev)
		f.clk.Advance(time.Minute)
		sc := models.Score{RevisionID: rev, Art: 0.7, ArtRuns: []float64{0.7, 0.7, 0.7}, Criteria: map[string]float64{}, Model: "m", Rubric: "r"}
		if ok, err := f.store.RecordScore(f.ctx, sc, models.Event{Event: models.TaskScore, Kind: models.KindRevision, ItemID: rev, UserID: ann,
			Outcome: models.OutcomeScored, Art: ptr(0.7), JobID: &score.ID}); err != nil || !ok {
			t.Fatalf("record the score: %v %v", ok, err)
		}
		old := f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, 'p', ?)`, ann, f.NowMs())
		if ok, err := f.store.RecordScreen(f.ctx, models.KindPitch, old, models.VerdictBlock, 0.8, models.Event{Event: models.TaskScreen,
			Kind: models.KindPitch, ItemID: old, UserID: ann, Outcome: models.OutcomeBlock}); err != nil || !ok {
			t.Fatalf("record a screen naming no job: %v %v", ok, err)
		}

		since := f.clk.Now().Add(-time.Hour)
		done, err := f.store.ListDoneJobs(f.ctx, models.JobFilter{}, since, models.JobsByID, nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range done {
			got = append(got, fmt.Sprintf("%d %s %s %d %v %s", j.ID, j.Task, j.Final.Outcome, j.Attempts, *j.ItemTitle, j.UserName))
		}
		want := []string{fmt.Sprintf("%d screen allow 2 Tide ann", screen.ID), fmt.Sprintf("%d score scored 0 Tide ann", score.ID)}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("settled jobs %v, want %v", got, want)
		}
		if n, err := f.store.CountDoneJobs(f.ctx, models.JobFilter{Task: models.TaskScore}, since); err != nil || n != 1 {
			t.Errorf("settled score jobs: %d %v", n, err)
		}
		if j, err := f.store.DoneJobByID(f.ctx, score.ID, since); err != nil || j.Final == nil || *j.Final.Art != 0.7 {
			t.Errorf("the settled score job: %+v %v", j, err)
		}
		if _, err := f.store.DoneJobByID(f.ctx, screen.ID, f.clk.Now()); models.NotFoundWhat(err) != "job" {
			t.Errorf("a job settled before since: %v, want not found", err)
		}

		// The events' retention prunes them: nothing of their own to prune.
		if _, err := f.store.Prune(f.ctx, f.clk.Now().Add(48*time.Hour), models.Retention{Events: 24 * time.Hour}, 0); err != nil {
			t.Fatal(err)
		}
		if n, err := f.store.CountDoneJobs(f.ctx, models.JobFilter{}, time.Time{}); err != nil || n != 0 {
			t.Errorf("settled jobs after their events were pruned: %d %v", n, err)
		}
	})
}
