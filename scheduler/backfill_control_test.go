package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/scheduler"
)

// The settings take a batch of 1 to MaxBatchSize rows and a pause of 0 or more; anything else
// is refused and changes nothing.
func TestBackfillSettingsBounds(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		for _, ok := range []scheduler.BackfillSettings{{BatchSize: 1}, {BatchSize: scheduler.MaxBatchSize, BatchPauseMs: 0}, {BatchSize: 7, BatchPauseMs: 250}} {
			if err := b.q.SetSettings(b.ctx, ok); err != nil {
				t.Errorf("%+v refused: %v", ok, err)
			}
		}
		for _, bad := range []scheduler.BackfillSettings{{BatchSize: 0}, {BatchSize: scheduler.MaxBatchSize + 1}, {BatchSize: -1}, {BatchSize: 10, BatchPauseMs: -1}} {
			if err := b.q.SetSettings(b.ctx, bad); err == nil {
				t.Errorf("%+v accepted", bad)
			}
		}
		if s, err := b.q.Settings(b.ctx); err != nil || s.BatchSize != 7 || s.BatchPauseMs != 250 {
			t.Errorf("settings %+v (%v), want the last accepted: 7 rows, 250 ms", s, err)
		}
	})
}

// Starting kicks the queue when it started a job, and only then; pausing wakes the running
// job's wait when it paused one, and only then. (On a queue that is not started, where the
// kick and the wake stay for the test to see.)
func TestBackfillStartAndPauseWakeTheQueueOnlyWhenTheyActed(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.scrape("chat-a", "puppet", models.ScrapeDone, paths("/img/%d.png", 1, 3)...)
		b.q.TakeQueueKick()
		b.start("")
		if !b.q.TakeQueueKick() {
			t.Error("a start that started a job did not kick the queue")
		}
		b.start("")
		if b.q.TakeQueueKick() {
			t.Error("a start that started nothing (the job runs already) kicked the queue")
		}
		woke := b.q.WatchWake()
		if err := b.q.PauseJobs(b.ctx, "chat-a"); err != nil {
			t.Fatal(err)
		}
		if !woke() {
			t.Error("a pause that paused a job did not wake the queue's wait")
		}
		woke = b.q.WatchWake()
		if err := b.q.PauseJobs(b.ctx, "chat-a"); err != nil {
			t.Fatal(err)
		}
		if woke() {
			t.Error("a pause that paused nothing woke the queue's wait")
		}
	})
}

// Started together, jobs run smallest first, and jobs of the same size in the order of their
// chats' first scrapes; a chat started later joins the end of that order.
func TestBackfillStartsEqualJobsInTheirChatsOrder(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.scrape("chat-m", "puppet", models.ScrapeDone, paths("/img/m%d.png", 1, 2)...)
		b.scrape("chat-b", "puppet", models.ScrapeDone, paths("/img/b%d.png", 1, 2)...)
		b.scrape("chat-s", "puppet", models.ScrapeDone, "/img/s1.png")
		b.start("")
		b.wantPositions(map[string]int64{"chat-s": 0, "chat-m": 1, "chat-b": 2})
		// A chat started later joins the end, however small and whatever its name.
		b.scrape("chat-a", "puppet", models.ScrapeDone, "/img/a1.png")
		b.start("chat-a")
		b.wantPositions(map[string]int64{"chat-s": 0, "chat-m": 1, "chat-b": 2, "chat-a": 3})
	})
}

// Starting all after a pause restarts every paused job, not only the first.
func TestBackfillStartAllRestartsEveryPausedJob(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.scrape("chat-a", "puppet", models.ScrapeDone, paths("/img/a%d.png", 1, 2)...)
		b.scrape("chat-b", "puppet", models.ScrapeDone, paths("/img/b%d.png", 1, 2)...)
		b.start("")
		if err := b.q.PauseJobs(b.ctx, ""); err != nil {
			t.Fatal(err)
		}
		b.start("")
		st := b.status()
		for _, chat := range []string{"chat-a", "chat-b"} {
			if got := b.mustJob(st, chat).State; got == models.BackfillPaused {
				t.Errorf("%s is still %s after starting all", chat, got)
			}
		}
	})
}

// When another process takes the queue lease while this one waits (here, for a walk), this one
// stops running the queue at its next renewal: it says so, fetches nothing more, and returns.
func TestBackfillLeaseLostStopsTheQueue(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(2, 0)
		b.scrape("chat-l", "puppet", models.ScrapeDone, paths("/img/%d.png", 1, 4)...)
		b.scrape("chat-w", "puppet", models.ScrapeActive) // a walk: the queue waits 10 min
		b.start("")
		taken := false
		b.setOnSleep(func(time.Duration) {
			if !taken {
				taken = true
				b.exec(`UPDATE backfill_runner SET owner = 'proc-b', lease_until = ?`, b.clk.Now().Add(time.Hour).UnixMilli())
			}
		})
		done := make(chan error, 1)
		go func() { done <- b.q.RunQueue(context.Background()) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run queue: %v", err)
			}
		case <-time.After(10 * time.Second): // a bound against a hang, never what decides a pass
			t.Fatal("the queue ran on after losing its lease")
		}
		if !taken {
			t.Fatal("the queue did not wait for the walk")
		}
		if recs := b.logs.named("backfill lease lost; another process runs the queue"); len(recs) != 1 {
			t.Errorf("logged %d lease losses, want 1", len(recs))
		}
		for _, p := range paths("/img/%d.png", 1, 4) {
			if n := b.cdn.hitsOf(p); n != 0 {
				t.Errorf("%s fetched %d times after the lease was lost, want never", p, n)
			}
		}
	})
}

// The queue lease is renewed once a third of it has passed since the last renewal, however
// long the wait between two looks at it: with a 6 s lease looked at every 5 s, a walk of
// 10 min keeps it this process's to the end.
func TestBackfillLeaseRenewedPastAThird(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db, withLease(6*time.Second, 5*time.Second))
		b.lateInAWalk(2, func() { b.wantLiveLease("proc-a") })
	})
}

// Rows skipped (kinds without a preview) and rows failed are progress as much as rows cached:
// a batch of only those is followed by the settings' pause, as any batch that settled rows.
func TestBackfillSkippedAndFailedRowsAreProgress(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(2, 1000)
		id := b.scrape("chat-s", "puppet", models.ScrapeDone, "/video/1", "/audio/2", "/garbage/3", "/garbage/4")
		b.start("")
		pauses := 0
		b.setOnSleep(func(d time.Duration) {
			if d == time.Second {
				pauses++
			}
		})
		b.run()
		want := map[string]string{"/video/1": "skipped", "/audio/2": "skipped", "/garbage/3": "failed", "/garbage/4": "failed"}
		if got := b.rowStates(id); len(got) != len(want) || got["/video/1"] != want["/video/1"] || got["/garbage/4"] != want["/garbage/4"] {
			t.Fatalf("rows %v, want %v", got, want)
		}
		if pauses != 2 {
			t.Errorf("%d pauses of 1 s, want one after each batch (2)", pauses)
		}
		if j := b.mustJob(b.status(), "chat-s"); j.State != "done" || j.Processed != 4 {
			t.Errorf("job = %s, processed %d; want done, 4", j.State, j.Processed)
		}
	})
}

// wantPositions checks each chat's place in the execution order as the status shows it.
func (b *bf) wantPositions(want map[string]int64) {
	b.t.Helper()
	st := b.status()
	for chat, pos := range want {
		if got := intOf(b.mustJob(st, chat).Position); got != itoa(pos) {
			b.t.Errorf("%s at position %s, want %d", chat, got, pos)
		}
	}
}
