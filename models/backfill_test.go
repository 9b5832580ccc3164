package models_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// The smoothed recent rate leaves a run's first rate-limit wait out and counts each from the
// WaitsCountFrom-th on, as the plain rate does (CountedWaitMs): one wait may be a burst's
// edge, recurring ones are the CDN's pace.
func TestSmoothedRateCountsWaitsOnceTheyRecur(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		f.startBackfill("chat-w")
		// A weight of 0 leaves the rate as it is, even unset.
		if j, err := f.store.RecordBackfillBatch(f.ctx, "chat-w", models.BatchRecord{Settled: 5, RunMs: 1_000, Smoothed: true}); err != nil || j.RecentPerMinute != nil {
			t.Fatalf("a batch of weight 0 set the smoothed rate to %v (err %v)", j.RecentPerMinute, err)
		}
		smoothedAfter := func(when string, rec models.BatchRecord, want float64) {
			t.Helper()
			j, err := f.store.RecordBackfillBatch(f.ctx, "chat-w", rec)
			if err != nil || j.RecentPerMinute == nil || !(math.Abs(*j.RecentPerMinute-want) <= 1e-9) { // NaN fails too
				t.Errorf("after %s: smoothed rate %v (err %v), want %v a minute", when, j.RecentPerMinute, err, want)
			}
		}
		// Each batch: 10 rows in 10 s of running time after a 3 s wait; a weight of 1 makes the
		// smoothed rate the batch's own.
		rec := models.BatchRecord{Settled: 10, RunMs: 10_000, WaitMs: 3_000, RecentWeight: 1, Smoothed: true}
		for i, want := range []float64{60, 10 * 60_000 / 13_000.0, 10 * 60_000 / 13_000.0} {
			smoothedAfter(fmt.Sprint("wait ", i+1), rec, want)
		}
		// A batch that took no time does not move it, whatever weight it is given.
		smoothedAfter("a batch of no time", models.BatchRecord{RecentWeight: 1, Smoothed: true}, 10*60_000/13_000.0)
	})
}

// The measured rate is reported once a run has 30 s of running time, not a millisecond
// before: settled rows over running time (plain) until then nothing.
func TestMeasuredRateFromThirtySecondsOfRunning(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		f.startBackfill("chat-r")
		j, err := f.store.RecordBackfillBatch(f.ctx, "chat-r", models.BatchRecord{Settled: 29, RunMs: 29_999})
		if err != nil || j.PerMinute != nil {
			t.Fatalf("after 29.999 s: rate %v (err %v), want none yet", j.PerMinute, err)
		}
		j, err = f.store.RecordBackfillBatch(f.ctx, "chat-r", models.BatchRecord{Settled: 1, RunMs: 1})
		if err != nil || j.PerMinute == nil || *j.PerMinute != 60 {
			t.Fatalf("after 30 s: rate %v (err %v), want 60 a minute", j.PerMinute, err)
		}
	})
}

// EndBackfillJob ends only a running job and says whether it did: a job paused meanwhile is
// left as it is.
func TestEndBackfillJobEndsOnlyARunningJob(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		f.startBackfill("chat-e")
		if _, err := f.store.PauseBackfillJobs(f.ctx, "chat-e"); err != nil {
			t.Fatal(err)
		}
		for _, state := range []string{models.BackfillPaused, models.BackfillDone} {
			if ended, err := f.store.EndBackfillJob(f.ctx, "chat-e", state); err != nil || ended {
				t.Errorf("ending a paused job as %s: ended %v, err %v; want it left alone", state, ended, err)
			}
		}
		f.startBackfill("chat-e")
		if ended, err := f.store.EndBackfillJob(f.ctx, "chat-e", models.BackfillPaused); err != nil || !ended {
			t.Errorf("ending a running job: ended %v, err %v; want it ended", ended, err)
		}
		if j, err := f.store.BackfillJobOf(f.ctx, "chat-e"); err != nil || j.State != models.BackfillPaused {
			t.Errorf("job %+v (err %v), want paused", j, err)
		}
	})
}

// A run's rate-limit waits count towards its plain rate once there were WaitsCountFrom of them,
// every one of them then; none before.
func TestCountedWaitsOnceTheyRecur(t *testing.T) {
	t.Parallel()
	for waits, want := range map[int64]int64{0: 0, 1: 0, models.WaitsCountFrom: 6_000, models.WaitsCountFrom + 1: 6_000} {
		j := models.BackfillJob{RunWaits: waits, RunWaitMs: 6_000}
		if got := j.CountedWaitMs(); got != want {
			t.Errorf("%d waits of 6 s in all: %d ms counted, want %d", waits, got, want)
		}
	}
}

// startBackfill starts chat's backfill job, as an admin's start does.
func (f *fixture) startBackfill(chat string) {
	f.t.Helper()
	if _, err := f.store.StartBackfillJobs(f.ctx, []models.JobStart{{ChatID: chat}}); err != nil {
		f.t.Fatalf("start the backfill of %s: %v", chat, err)
	}
}
