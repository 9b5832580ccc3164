package models_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// openBreaker opens the shared model breaker as five upstream 503s in a row would, with its
// first probe at nextProbe, and reports whether this call opened it (false: it was open).
func openBreaker(t *testing.T, ctx context.Context, s *models.Store, nextProbe time.Time) bool {
	t.Helper()
	status, lastErr := 503, "upstream 503"
	_, ok, err := s.OpenBreaker(ctx, 5, models.WhyUpstream, &status, &lastErr, nextProbe)
	if err != nil {
		t.Fatalf("open the breaker: %v", err)
	}
	return ok
}

// TestProbeOutcomesMoveTheJobsPutOff: a failed probe moves the jobs put off until its end to
// the next probe; a closing makes them, and every job put off untried, due now; either tells
// the live views only when a job moved.
func TestProbeOutcomesMoveTheJobsPutOff(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		told := f.listen()
		ann := f.User("ann")
		f.bulkPitches(ann, 1)
		job := f.MustJob(models.TaskScreen, models.KindPitch, f.Count(`SELECT MAX(id) FROM pitches`))
		due := func() time.Time { return f.MustJob(models.TaskScreen, models.KindPitch, job.ItemID).DueAt }
		probe := func() {
			t.Helper()
			if _, ok, err := f.store.ClaimProbe(f.ctx, "a", f.clk.Now().Add(30*time.Second)); err != nil || !ok {
				t.Fatalf("claim the probe: %v, %v", ok, err)
			}
			told.reset()
		}
		if !openBreaker(t, f.ctx, f.store, f.clk.Now()) {
			t.Fatal("open: the breaker was open already")
		}

		parked := f.clk.Now().Add(time.Minute)
		f.Exec(`UPDATE content_jobs SET due_at = ? WHERE id = ?`, parked.UnixMilli(), job.ID)
		probe()
		next := f.clk.Now().Add(5 * time.Minute)
		if _, ok, err := f.store.ProbeFailed(f.ctx, "a", next, parked, nil); err != nil || !ok {
			t.Fatalf("probe failed: %v, %v", ok, err)
		}
		if !due().Equal(next) || !told.allTold() {
			t.Errorf("after a failed probe the job is due %v (want %v), views told %v", due(), next, told.allTold())
		}

		f.clk.Set(next) // the job is due now: nothing is put off any more
		probe()
		if _, ok, err := f.store.ProbeFailed(f.ctx, "a", next.Add(time.Minute), next, nil); err != nil || !ok {
			t.Fatalf("probe failed again: %v, %v", ok, err)
		}
		if !due().Equal(next) || told.allTold() {
			t.Errorf("a failed probe that moved nothing: due %v, views told %v", due(), told.allTold())
		}

		f.clk.Set(next.Add(time.Minute))
		later := f.clk.Now().Add(time.Hour)
		f.Exec(`UPDATE content_jobs SET due_at = ? WHERE id = ?`, later.UnixMilli(), job.ID) // put off untried
		probe()
		if _, ok, err := f.store.CloseBreaker(f.ctx, "a", f.clk.Now()); err != nil || !ok {
			t.Fatalf("close: %v, %v", ok, err)
		}
		if !due().Equal(f.clk.Now()) || !told.allTold() {
			t.Errorf("after the close the job is due %v (want now, %v), views told %v", due(), f.clk.Now(), told.allTold())
		}

		if !openBreaker(t, f.ctx, f.store, f.clk.Now()) {
			t.Fatal("open again: the breaker was open already")
		}
		probe()
		if _, ok, err := f.store.CloseBreaker(f.ctx, "a", f.clk.Now()); err != nil || !ok {
			t.Fatalf("close again: %v, %v", ok, err)
		}
		if told.allTold() {
			t.Error("a close that moved no job told every view")
		}
	})
}

// TestParkJobTellsItsAuthorOnlyWhenItPutTheJobOff: a claimed job put off by the open breaker is
// due at the probe, leased by no one, and its author's view is told; a park by an owner that no
// longer holds the job changes and tells nothing.
func TestParkJobTellsItsAuthorOnlyWhenItPutTheJobOff(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		told := f.listen()
		ann := f.User("ann")
		f.bulkPitches(ann, 1)
		probeAt := f.clk.Now().Add(time.Minute)
		if !openBreaker(t, f.ctx, f.store, probeAt) {
			t.Fatal("open: the breaker was open already")
		}
		jobs, err := f.store.ClaimDue(f.ctx, 1, time.Minute, "w1", 0)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim: %v, %v", jobs, err)
		}
		stale := jobs[0]
		stale.LeaseOwner = ptr("w2")
		told.reset()
		if ok, err := f.store.ParkJob(f.ctx, stale, probeAt); err != nil || ok || len(told.ids()) != 0 {
			t.Errorf("park by an owner without the lease: %v, %v, told %v", ok, err, told.ids())
		}
		if ok, err := f.store.ParkJob(f.ctx, jobs[0], probeAt); err != nil || !ok || !slices.Contains(told.ids(), ann) {
			t.Errorf("park: %v, %v, told %v", ok, err, told.ids())
		}
		j := f.MustJob(jobs[0].Task, jobs[0].Kind, jobs[0].ItemID)
		if !j.DueAt.Equal(probeAt) || j.LeaseOwner != nil {
			t.Errorf("parked job due %v, leased by %v; want due at the probe, free", j.DueAt, j.LeaseOwner)
		}
	})
}

// TestParkDueTellsWhoseJobsItPutOff: one author's park tells that author, everyone's tells
// every view, and a park that put nothing off tells nobody.
func TestParkDueTellsWhoseJobsItPutOff(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		told := f.listen()
		ann, bob := f.User("ann"), f.User("bob")
		f.bulkPitches(ann, 2)
		f.bulkPitches(bob, 1)
		probeAt := f.clk.Now().Add(time.Minute)
		if !openBreaker(t, f.ctx, f.store, probeAt) {
			t.Fatal("open: the breaker was open already")
		}
		told.reset()
		if n, err := f.store.ParkDue(f.ctx, probeAt, ann); err != nil || n != 2 || told.allTold() || !slices.Equal(told.ids(), []int64{ann}) {
			t.Errorf("ann's park: %d, %v; told %v (all %v), want ann's 2 and ann told", n, err, told.ids(), told.allTold())
		}
		told.reset()
		if n, err := f.store.ParkDue(f.ctx, probeAt, ann); err != nil || n != 0 || told.allTold() || len(told.ids()) != 0 {
			t.Errorf("ann's park again: %d, %v; told %v (all %v), want nothing", n, err, told.ids(), told.allTold())
		}
		if n, err := f.store.ParkDue(f.ctx, probeAt, 0); err != nil || n != 1 || !told.allTold() {
			t.Errorf("everyone's park: %d, %v; all told %v, want bob's 1 and every view told", n, err, told.allTold())
		}
	})
}

// An admin's test call that got an answer closes an open breaker: the jobs it put off until
// its next probe and those put off untried are due now, and the model.breaker webhook is owed.
// A closed breaker is left as it is.
func TestManualProbeAnsweredClosesTheBreakerAndReleasesItsJobs(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		if _, err := f.store.CreateWebhook(f.ctx, "https://hooks.test/breaker", []string{models.EventModelBreaker}, "secret"); err != nil {
			t.Fatal(err)
		}
		ann := f.User("ann")
		f.bulkPitches(ann, 2)
		parked := f.MustJob(models.TaskScreen, models.KindPitch, f.Count(`SELECT MIN(id) FROM pitches`))
		untried := f.MustJob(models.TaskScreen, models.KindPitch, f.Count(`SELECT MAX(id) FROM pitches`))
		next := f.clk.Now().Add(5 * time.Minute)
		if !openBreaker(t, f.ctx, f.store, next) {
			t.Fatal("open: the breaker was open already")
		}
		f.Exec(`UPDATE content_jobs SET why = 'upstream', due_at = ? WHERE id = ?`, next.UnixMilli(), parked.ID)
		f.Exec(`UPDATE content_jobs SET due_at = ? WHERE id = ?`, f.clk.Now().Add(time.Hour).UnixMilli(), untried.ID)
		owed := func() int64 {
			return f.Count(`SELECT COUNT(*) FROM webhook_deliveries WHERE event = ?`, models.EventModelBreaker)
		}
		opened := owed() // the opening's

		b, closed, err := f.store.ManualProbeAnswered(f.ctx)
		if err != nil || !closed || b.State != models.BreakerClosed {
			t.Fatalf("manual probe answered: %+v, closed %v, err %v", b, closed, err)
		}
		for name, j := range map[string]models.Job{"parked until the next probe": parked, "put off untried": untried} {
			if due := f.MustJob(models.TaskScreen, models.KindPitch, j.ItemID).DueAt; !due.Equal(f.clk.Now()) {
				t.Errorf("the job %s is due %v, want now (%v)", name, due, f.clk.Now())
			}
		}
		if n := owed(); n != opened+1 {
			t.Errorf("%d model.breaker deliveries owed, want %d (the closing's)", n, opened+1)
		}
		if _, closed, err := f.store.ManualProbeAnswered(f.ctx); err != nil || closed || owed() != opened+1 {
			t.Errorf("a closed breaker: closed %v, err %v, %d deliveries; want left as it is", closed, err, owed())
		}
	})
}

// A failed manual probe keeps its error on the breaker's row, its state unchanged; a failure
// without words keeps the last one.
func TestManualProbeFailedKeepsItsError(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		openBreaker(t, f.ctx, f.store, f.clk.Now().Add(time.Minute))
		lastError := func() string {
			b, err := f.store.ReadBreaker(f.ctx)
			if err != nil || b.LastError == nil || b.State != models.BreakerOpen {
				t.Fatalf("breaker %+v, err %v; want open with an error", b, err)
			}
			return *b.LastError
		}
		msg := "manual probe: upstream 502"
		if err := f.store.ManualProbeFailed(f.ctx, &msg); err != nil || lastError() != msg {
			t.Errorf("last error %q (err %v), want %q", lastError(), err, msg)
		}
		if err := f.store.ManualProbeFailed(f.ctx, nil); err != nil || lastError() != msg {
			t.Errorf("after a failure without words: last error %q (err %v), want %q kept", lastError(), err, msg)
		}
	})
}
