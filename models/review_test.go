package models_test

import (
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// A job sent to review is claimed by no claimer, however long it waits: not the sweeps'
// ClaimDue (everyone's or its author's), not the write's ClaimItem, not a retry; and its author's
// view does not count it due. Deleting the item takes its entry with it.
func TestReviewJobsAreNeverClaimed(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		u := f.User("ann")
		p, err := f.store.CreatePitch(f.ctx, u, "unsure")
		if err != nil {
			t.Fatal(err)
		}
		jobs, err := f.store.ClaimDue(f.ctx, 10, time.Minute, "w1", 0)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim: %v %v", jobs, err)
		}
		ev := models.Event{Event: models.TaskScreen, Kind: models.KindPitch, ItemID: p.ID, UserID: u, Outcome: models.OutcomePending}
		if ok, err := f.store.EnterReview(f.ctx, jobs[0], models.VerdictBlock, 0.4, ev); err != nil || !ok {
			t.Fatalf("enter review: %v %v", ok, err)
		}
		// The entry is recorded as its event, once: a stale worker's second try does nothing.
		if ok, err := f.store.EnterReview(f.ctx, jobs[0], models.VerdictBlock, 0.4, ev); err != nil || ok {
			t.Fatalf("enter review again: %v %v", ok, err)
		}
		if evs := f.Events(models.KindPitch, p.ID); len(evs) != 1 || evs[0].Outcome != models.OutcomePending {
			t.Errorf("events after entering review: %+v, want the one pending", evs)
		}
		for _, wait := range []time.Duration{0, 3 * time.Minute, 400 * 24 * time.Hour} {
			f.clk.Advance(wait)
			if got, err := f.store.ClaimDue(f.ctx, 10, time.Minute, "w2", 0); err != nil || len(got) != 0 {
				t.Errorf("after %v ClaimDue took %v (%v)", wait, got, err)
			}
			if got, err := f.store.ClaimDue(f.ctx, 10, time.Minute, "w2", u); err != nil || len(got) != 0 {
				t.Errorf("after %v the author's ClaimDue took %v (%v)", wait, got, err)
			}
			if _, ok, err := f.store.ClaimItem(f.ctx, models.TaskScreen, models.KindPitch, p.ID, time.Minute, "w3"); err != nil || ok {
				t.Errorf("after %v ClaimItem took it (%v)", wait, err)
			}
			if n, err := f.store.RetryJobs(f.ctx, models.JobFilter{}); err != nil || n != 0 {
				t.Errorf("after %v a retry made %d due (%v)", wait, n, err)
			}
			// Once the runner has swept the author, the view waits on nothing for a day at least.
			if err := f.store.RaiseNextDue(f.ctx, u, f.clk.Now()); err != nil {
				t.Fatal(err)
			}
			v, err := f.store.MineVersion(f.ctx, u, f.clk.Now())
			if now := f.clk.Now(); err != nil || v.Due(now) || v.Jobs != 1 || v.WakeAt(now).Before(now.Add(24*time.Hour)) {
				t.Errorf("after %v the author's view: %+v (%v)", wait, v, err)
			}
		}
		open, err := f.store.OpenReviews(f.ctx, models.ReviewFilter{}, nil, 10)
		if err != nil || len(open) != 1 || *open[0].Suggestion != models.VerdictBlock || *open[0].Confidence != 0.4 {
			t.Fatalf("open reviews: %+v %v", open, err)
		}
		if err := f.store.DeleteItem(f.ctx, u, models.KindPitch, p.ID); err != nil {
			t.Fatal(err)
		}
		if open, err := f.store.OpenReviews(f.ctx, models.ReviewFilter{}, nil, 10); err != nil || len(open) != 0 {
			t.Errorf("after deleting the item: %+v %v", open, err)
		}
	})
}
