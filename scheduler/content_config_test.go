package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
	"github.com/owed/owed/scheduler"
)

// ContentConfig's zero fields take the documented defaults (owed's settings default to them),
// and the fields set are kept as given, but for a model cap below a score's three calls,
// which is raised to three so a score can ever run.
func TestContentConfigDefaultsAndKeeps(t *testing.T) {
	t.Parallel()
	r := newRig(t, "sqlite:"+t.TempDir()+"/owed.db")
	zero := scheduler.NewContent(r.store, nil, r.clk, nil, nil, scheduler.ContentConfig{}).Config()
	if zero.Lease != scheduler.DefaultLease || zero.ModelName != scheduler.DefaultModelName ||
		zero.Concurrency != scheduler.DefaultConcurrency || zero.Owner == "" || zero.Every != scheduler.DefaultSweepEvery ||
		zero.ModelConcurrency != scheduler.DefaultModelConcurrency || zero.ModelBreaker != scheduler.DefaultModelBreaker {
		t.Errorf("the zero config became %+v; want every default", zero)
	}
	if scheduler.DefaultLease != 2*time.Minute || scheduler.DefaultConcurrency != 512 || scheduler.DefaultSweepEvery != time.Minute ||
		scheduler.DefaultModelConcurrency != 16 || scheduler.DefaultModelBreaker != 10 || scheduler.DefaultModelName != "critic" {
		t.Errorf("the defaults changed from the README's: lease %v, concurrency %d, sweep %v, model cap %d, breaker %d, model %q",
			scheduler.DefaultLease, scheduler.DefaultConcurrency, scheduler.DefaultSweepEvery, scheduler.DefaultModelConcurrency,
			scheduler.DefaultModelBreaker, scheduler.DefaultModelName)
	}

	set := scheduler.ContentConfig{Lease: 30 * time.Second, ModelName: "judge", Concurrency: 1, Owner: "me",
		Every: 5 * time.Second, ModelConcurrency: 1, ModelBreaker: -1}
	got := scheduler.NewContent(r.store, nil, r.clk, nil, nil, set).Config()
	if got.Lease != 30*time.Second || got.ModelName != "judge" || got.Concurrency != 1 || got.Owner != "me" ||
		got.Every != 5*time.Second || got.ModelBreaker != -1 {
		t.Errorf("the config set became %+v; want it kept", got)
	}
	if got.ModelConcurrency != scheduler.ScoreRuns {
		t.Errorf("a model cap of 1 became %d, want %d (a score's calls)", got.ModelConcurrency, scheduler.ScoreRuns)
	}
	other := scheduler.NewContent(r.store, nil, r.clk, nil, nil, scheduler.ContentConfig{}).Config()
	if other.Owner == zero.Owner {
		t.Errorf("two runners with no owner set share %q; want one each", other.Owner)
	}
}

// An author's sweep asked for after Stop starts nothing: none is under way, and the author's
// job is left as it was.
func TestSweepAuthorAfterStopStartsNothing(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		defer cancel()
		if err := r.content.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		r.content.SweepAuthor(ann)
		r.content.SweepAuthor(ann)
		if n := r.content.AuthorSweepsUnderWay(); n != 0 {
			t.Errorf("%d author sweeps under way after Stop, want 0: no sweep started", n)
		}
		if j := r.mustJob(models.TaskScreen, models.KindPitch, p); j.Attempts != 0 || j.LeaseOwner != nil {
			t.Errorf("job %+v; want it untouched", j)
		}
		r.wantNothingAsked(t, ann, p)
	})
}

// An author's sweep runs in the background, so one that fails (the database) logs an error
// line with the author; one that ends well logs none.
func TestSweepAuthorLogsOnlyItsFailure(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		var logs syncBuffer
		r := newRig(t, db, withLogger(jsonLog(&logs)))
		ann, bob := r.user("ann"), r.user("bob")
		p := r.pitch(ann, "p")
		r.pitch(bob, "q")

		r.content.SweepAuthor(ann)
		// Her sweep goes on claiming after her job settles: wait for its end, not the job's.
		wait.Until(t, "ann's sweep to end", func() bool { return r.content.AuthorSweepsUnderWay() == 0 })
		if _, owed := r.job(models.TaskScreen, models.KindPitch, p); owed {
			t.Fatal("ann's sweep ended with her pitch still owed")
		}

		r.exec(`ALTER TABLE content_jobs RENAME TO content_jobs_gone`)
		r.content.SweepAuthor(bob)
		wait.Until(t, "bob's failed sweep's error line", func() bool { return len(errorLines(logs.lines())) > 0 })
		r.exec(`ALTER TABLE content_jobs_gone RENAME TO content_jobs`)
		ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		defer cancel()
		if err := r.content.Stop(ctx); err != nil { // every author sweep over
			t.Fatal(err)
		}
		errs := errorLines(logs.lines())
		if len(errs) != 1 || errs[0]["msg"] != "author sweep" || errs[0]["userId"] != float64(bob) {
			t.Fatalf("error lines %v; want one, for bob's sweep", errs)
		}
	})
}
