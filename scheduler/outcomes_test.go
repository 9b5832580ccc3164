package scheduler_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
	"github.com/owed/owed/scheduler"
)

// The rows of "How a job ends" (docs/architecture.md) that earlier tests do not already show;
// each ends through the one completion path and records exactly what the table says.

// wantUntouched checks a job that was let go without an attempt: no attempt, no why, due when it
// was, and its lease as want (nil: freed).
func wantUntouched(t testing.TB, j models.Job, dueAt time.Time, leaseOwner *string) {
	t.Helper()
	if j.Attempts != 0 || j.Why != nil || j.DueAt.UnixMilli() != dueAt.UnixMilli() {
		t.Errorf("job %+v: want no attempt, no why, due at %v", j, dueAt.UTC())
	}
	if !eqPtr(j.LeaseOwner, leaseOwner) || (leaseOwner == nil) != (j.LeaseUntil == nil) {
		t.Errorf("job lease owner %v until %v, want owner %v", str(j.LeaseOwner), j.LeaseUntil, str(leaseOwner))
	}
}

// wantNothingAsked checks that no model call was made, nothing charged to userID and no
// event kept for the pitches.
func (r *rig) wantNothingAsked(t testing.TB, userID int64, pitches ...int64) {
	t.Helper()
	evs := 0
	for _, p := range pitches {
		evs += len(r.events(models.KindPitch, p))
	}
	if r.model.Calls() != 0 || r.spent(userID) != 0 || evs != 0 {
		t.Fatalf("calls %d, spent %d, events %d; want nothing asked, charged or recorded", r.model.Calls(), r.spent(userID), evs)
	}
}

// A database error while the item is read is an attempt with why unavailable and the backoff
// (not a lease left to run out): nothing asked or charged; the error is logged, not kept in
// words the console would show. Once the database answers, the job runs after its backoff.
func TestRunDatabaseErrorReadingTheItemIsUnavailable(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		r.exec(`ALTER TABLE pitches RENAME TO pitches_gone`)
		out := r.run(models.TaskScreen, models.KindPitch, p)
		r.exec(`ALTER TABLE pitches_gone RENAME TO pitches`)
		if out != scheduler.Pending {
			t.Fatalf("outcome %s, want pending", out)
		}
		j := r.mustJob(models.TaskScreen, models.KindPitch, p)
		wantPending(t, j, models.WhyUnavailable, 1, r.clk.Now().Add(time.Minute), nil)
		if j.LastError == nil || strings.Contains(*j.LastError, "pitches") {
			t.Errorf("last error %v, want words without the database's error", str(j.LastError))
		}
		wantEvent(t, r.lastEvent(models.KindPitch, p), models.Event{Event: "screen", Kind: models.KindPitch, ItemID: p, UserID: ann,
			Outcome: "pending", Why: ptr(models.WhyUnavailable)})
		if r.model.Calls() != 0 || r.spent(ann) != 0 {
			t.Fatalf("calls %d, spent %d; want nothing asked or charged", r.model.Calls(), r.spent(ann))
		}
		r.clk.Advance(time.Minute)
		if n, err := r.content.Sweep(r.ctx, 0); n != 1 || err != nil {
			t.Fatalf("sweep = %d, %v", n, err)
		}
		r.noJob(models.TaskScreen, models.KindPitch, p)
	})
}

// A database error while the answer is recorded is an attempt with why unavailable, the
// model's status and time kept: the call was made and stays charged.
func TestRunDatabaseErrorRecordingIsUnavailable(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		var once sync.Once
		var renamed error
		r.model.Handle(func(http.ResponseWriter, *http.Request) bool {
			once.Do(func() { _, renamed = r.store.RawExec(r.ctx, `ALTER TABLE screens RENAME TO screens_gone`) })
			return false
		})
		out := r.run(models.TaskScreen, models.KindPitch, p)
		once.Do(func() {})
		if renamed != nil {
			t.Fatal(renamed)
		}
		r.exec(`ALTER TABLE screens_gone RENAME TO screens`)
		if out != scheduler.Pending {
			t.Fatalf("outcome %s, want pending", out)
		}
		wantPending(t, r.mustJob(models.TaskScreen, models.KindPitch, p), models.WhyUnavailable, 1, r.clk.Now().Add(time.Minute), ptr(200))
		ev := r.lastEvent(models.KindPitch, p)
		wantEvent(t, ev, models.Event{Event: "screen", Kind: models.KindPitch, ItemID: p, UserID: ann,
			Outcome: "pending", Why: ptr(models.WhyUnavailable), Status: ptr(200), Confidence: ptr(0.9), RequestBytes: ev.RequestBytes})
		if ev.UpstreamMs == nil || ev.RequestBytes == nil {
			t.Errorf("event %s: want the model's time and request size kept", fmtEvent(ev))
		}
		if r.model.Calls() != 1 || r.spent(ann) != 1 {
			t.Fatalf("calls %d, spent %d; want the one call made and charged", r.model.Calls(), r.spent(ann))
		}
	})
}

// A task this process does not run (a newer replica's) is an error, not a score: an attempt
// with why refused and the backoff, nothing asked or charged.
func TestRunUnknownTaskIsRefused(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		j := r.claim(models.TaskScreen, models.KindPitch, p)
		j.Task = "remix" // as an older process would read a newer task's row
		if out, err := r.content.Run(r.ctx, j); out != scheduler.Pending || err != nil {
			t.Fatalf("Run = %s, %v; want pending", out, err)
		}
		got := r.mustJob(models.TaskScreen, models.KindPitch, p)
		wantPending(t, got, models.WhyRefused, 1, r.clk.Now().Add(time.Minute), nil)
		if got.LastError == nil || !strings.Contains(*got.LastError, `"remix"`) {
			t.Errorf("last error %v, want the task named", str(got.LastError))
		}
		if r.model.Calls() != 0 || r.spent(ann) != 0 {
			t.Fatalf("calls %d, spent %d; want nothing asked or charged", r.model.Calls(), r.spent(ann))
		}
	})
}

// A job whose lease has run out by the time it is to be asked is let go without an attempt,
// unasked and uncharged. If another worker holds it by then, its lease is left alone.
func TestRunLeaseOverIsReleasedWithoutAttempt(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		p, p2 := r.pitch(ann, "p"), r.pitch(ann, "p2")
		due := r.clk.Now()
		lease := r.content.Config().Lease

		j := r.claim(models.TaskScreen, models.KindPitch, p)
		r.clk.Advance(lease - lease/10) // the tenth kept for recording is all that is left
		if out, err := r.content.Run(r.ctx, j); out != scheduler.Pending || err != nil {
			t.Fatalf("Run = %s, %v; want pending", out, err)
		}
		wantUntouched(t, r.mustJob(models.TaskScreen, models.KindPitch, p), due, nil)

		stale := r.claim(models.TaskScreen, models.KindPitch, p2)
		r.clk.Advance(lease)
		other, ok, err := r.store.ClaimItem(r.ctx, models.TaskScreen, models.KindPitch, p2, lease, "other-worker")
		if err != nil || !ok {
			t.Fatalf("the other worker's claim: %v, %v", ok, err)
		}
		if out, err := r.content.Run(r.ctx, stale); out != scheduler.Pending || err != nil {
			t.Fatalf("Run = %s, %v; want pending", out, err)
		}
		got := r.mustJob(models.TaskScreen, models.KindPitch, p2)
		wantUntouched(t, got, due, ptr("other-worker"))
		if !got.LeaseUntil.Equal(*other.LeaseUntil) {
			t.Errorf("the other worker's lease until %v, want %v", got.LeaseUntil, other.LeaseUntil)
		}
		r.wantNothingAsked(t, ann, p, p2)
	})
}

// A job whose lease another worker took while it was asked (the lease ran out meanwhile)
// records nothing: the attempt is the new holder's to make.
func TestRunLostLeaseRecordsNothing(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		due := r.clk.Now()
		r.model.Handle(func(w http.ResponseWriter, _ *http.Request) bool {
			r.exec(`UPDATE content_jobs SET lease_owner = 'other-worker' WHERE kind = 'pitch' AND item_id = ?`, p)
			http.Error(w, `{"error":"down"}`, http.StatusServiceUnavailable)
			return true
		})
		if out := r.run(models.TaskScreen, models.KindPitch, p); out != scheduler.Pending {
			t.Fatalf("outcome %s, want pending", out)
		}
		j := r.mustJob(models.TaskScreen, models.KindPitch, p)
		if j.Attempts != 0 || j.Why != nil || j.DueAt.UnixMilli() != due.UnixMilli() || str(j.LeaseOwner) != "other-worker" {
			t.Errorf("job %+v: want it as the other worker holds it", j)
		}
		if evs := r.events(models.KindPitch, p); len(evs) != 0 {
			t.Errorf("events %+v, want none", evs)
		}
	})
}

// Stopping while the model is asked lets the job go without an attempt: due again at once for
// another worker (the call made stays charged).
func TestRunShutdownDuringAskIsReleased(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		due := r.clk.Now()
		ctx, cancel := context.WithCancel(r.ctx)
		defer cancel()
		r.model.Handle(func(w http.ResponseWriter, req *http.Request) bool {
			cancel()
			<-req.Context().Done() // the client gives up on the call
			return true
		})
		out, err := r.content.Run(ctx, r.claim(models.TaskScreen, models.KindPitch, p))
		if out != scheduler.Pending || err != nil {
			t.Fatalf("Run = %s, %v; want pending", out, err)
		}
		wantUntouched(t, r.mustJob(models.TaskScreen, models.KindPitch, p), due, nil)
		if evs := r.events(models.KindPitch, p); len(evs) != 0 {
			t.Errorf("events %+v, want none", evs)
		}
	})
}

// An open breaker puts the job off until its probe: no attempt, no charge, no call; the job
// keeps its own why.
func TestRunBreakerOpenIsPutOff(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		probe := r.clk.Now().Add(time.Minute)
		if _, ok, err := r.store.OpenBreaker(r.ctx, 10, models.WhyUnreachable, nil, nil, probe); err != nil || !ok {
			t.Fatalf("open the breaker: %v, %v", ok, err)
		}
		if out := r.run(models.TaskScreen, models.KindPitch, p); out != scheduler.Pending {
			t.Fatalf("outcome %s, want pending", out)
		}
		wantUntouched(t, r.mustJob(models.TaskScreen, models.KindPitch, p), probe, nil)
		r.wantNothingAsked(t, ann, p)
	})
}

// A hold set after a job was claimed puts it off: not charged, not asked, no attempt; its
// lease freed and its due time kept, so no claim takes it while the hold lasts and it is due
// at its own time once lifted.
func TestRunHeldAfterClaimIsPutOff(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		due := r.clk.Now()
		j := r.claim(models.TaskScreen, models.KindPitch, p)
		if err := r.store.SetHolds(r.ctx, models.Holds{Screen: true}, 0); err != nil {
			t.Fatal(err)
		}
		if out, err := r.content.Run(r.ctx, j); out != scheduler.Pending || err != nil {
			t.Fatalf("Run = %s, %v; want pending", out, err)
		}
		wantUntouched(t, r.mustJob(models.TaskScreen, models.KindPitch, p), due, nil)
		r.wantNothingAsked(t, ann, p)
		if n, err := r.content.Sweep(r.ctx, 0); n != 0 || err != nil {
			t.Fatalf("sweep while held ran %d, %v; want none", n, err)
		}
		if err := r.store.SetHolds(r.ctx, models.Holds{}, 0); err != nil {
			t.Fatal(err)
		}
		if n, err := r.content.Sweep(r.ctx, 0); n != 1 || err != nil {
			t.Fatalf("sweep after the hold ran %d, %v; want the job", n, err)
		}
		r.noJob(models.TaskScreen, models.KindPitch, p)
	})
}

// A revision's screen is followed by its score only when it allowed the revision: a blocked
// revision's follow-up would run a score job it happens to owe (one written by hand here),
// and none runs. Stop waits for every follow-up before the counts are read.
func TestRunItemScoreFollowsOnlyAnAllow(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		r.model.SetVerdict("block", 0.9)
		_, blocked := r.song(ann, "B", "b")
		r.exec(`INSERT INTO content_jobs (task, kind, item_id, user_id, due_at) VALUES ('score', 'revision', ?, ?, ?)`, blocked, ann, r.nowMs())
		if out := <-r.content.RunItem(models.TaskScreen, models.KindRevision, blocked); out != scheduler.Done {
			t.Fatalf("screen = %s, want done", out)
		}
		r.model.SetVerdict("allow", 0.9)
		_, allowed := r.song(ann, "A", "a")
		if out := <-r.content.RunItem(models.TaskScreen, models.KindRevision, allowed); out != scheduler.Done {
			t.Fatalf("screen = %s, want done", out)
		}
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		defer cancel()
		if err := r.content.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if r.model.Calls() != 2+scheduler.ScoreRuns {
			t.Errorf("calls %d, want two screens and one score", r.model.Calls())
		}
		r.noJob(models.TaskScore, models.KindRevision, allowed)
		if j := r.mustJob(models.TaskScore, models.KindRevision, blocked); j.Attempts != 0 || j.LeaseOwner != nil {
			t.Errorf("the blocked revision's score job %+v, want it untouched", j)
		}
	})
}

// A claim takes a job's full model slots up front: a score met with one free slot is not held
// under lease while it waits for three (a replica with room may take it meanwhile); the sweep
// waits for the three unleased, then runs it.
func TestSweepClaimsAScoreOnlyWithItsThreeSlots(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		var logs syncBuffer
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelConcurrency = scheduler.ScoreRuns }),
			withLogger(jsonLog(&logs)))
		ann := r.user("ann")
		release := make(chan struct{})
		var releaseOnce sync.Once
		letGo := func() { releaseOnce.Do(func() { close(release) }) }
		defer letGo() // a failure below must not leave the calls hanging
		var mu sync.Mutex
		held := 0
		r.model.Handle(func(http.ResponseWriter, *http.Request) bool {
			mu.Lock()
			first := held < 2
			held++
			mu.Unlock()
			if first {
				<-release
			}
			return false
		})
		var screens []<-chan scheduler.Outcome // two screens hold two of the three slots
		for _, body := range []string{"p1", "p2"} {
			screens = append(screens, r.content.RunItem(models.TaskScreen, models.KindPitch, r.pitch(ann, body)))
		}
		wait.Until(t, "two screens calling", func() bool { return r.model.InFlight() == 2 })
		_, rev := r.allowedRevision(ann, "S", "c")

		swept := make(chan int, 1)
		go func() {
			n, err := r.content.Sweep(r.ctx, 0)
			if err != nil {
				t.Error(err)
			}
			swept <- n
		}()
		wait.Until(t, "the sweep waiting for three slots", func() bool { return r.content.ModelWaiters() == 1 })
		if j := r.mustJob(models.TaskScore, models.KindRevision, rev); j.LeaseOwner != nil || j.Attempts != 0 {
			t.Fatalf("score job %+v while the sweep waits for its slots: want it unleased", j)
		}
		letGo()
		for _, s := range screens {
			<-s
		}
		if n := <-swept; n != 1 {
			t.Fatalf("sweep ran %d, want the score", n)
		}
		r.noJob(models.TaskScore, models.KindRevision, rev)
		if r.model.MaxInFlight() > scheduler.ScoreRuns {
			t.Errorf("%d calls at once, want at most %d", r.model.MaxInFlight(), scheduler.ScoreRuns)
		}
		if errs := errorLines(logs.lines()); len(errs) != 0 {
			t.Errorf("error lines %v; want none (the score let go unrun was released)", errs)
		}
	})
}
