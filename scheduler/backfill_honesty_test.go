package scheduler_test

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/scheduler"
	"github.com/owed/owed/webhooks"
)

// finishedDeliveries is the backfill.finished payloads owed so far.
func (b *bf) finishedDeliveries() []string {
	b.t.Helper()
	var rows []struct {
		Payload string `gorm:"column:payload"`
	}
	if err := b.store.RawScan(b.ctx, &rows, `SELECT payload FROM webhook_deliveries WHERE event = ? ORDER BY id`, models.EventBackfillFinished); err != nil {
		b.t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Payload
	}
	return out
}

func (b *bf) hook() {
	b.t.Helper()
	if _, err := b.store.CreateWebhook(b.ctx, "https://hooks.example/owed", []string{models.EventBackfillFinished}, webhooks.NewSecret()); err != nil {
		b.t.Fatal(err)
	}
}

// A job paused during its last batch has nothing left once that batch ends: it settles done
// (with its webhook), not "paused · 100 % · pending 0" for ever.
func TestBackfillPausedDuringItsLastBatchSettlesDone(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(2, 1000)
		b.hook()
		b.scrape("chat-l", "puppet", models.ScrapeDone, paths("/img/%d.png", 1, 4)...)
		b.start("")
		var during *scheduler.BackfillJobStatus
		b.cdn.onHit = func(p string) {
			if p == "/img/4.png" {
				if err := b.q.PauseJobs(b.ctx, "chat-l"); err != nil {
					t.Error(err)
				}
				j := b.mustJob(b.status(), "chat-l")
				during = &j
			}
		}
		b.run()
		if during == nil || during.State != "paused" || during.Pending != 1 {
			t.Fatalf("during the last row: %+v, want paused with 1 pending (the pause holds while work is left)", during)
		}
		j := b.mustJob(b.status(), "chat-l")
		if j.State != "done" || j.FinishedAt == nil || j.Pending != 0 || j.Processed != 4 || j.Position != nil {
			t.Errorf("after its last batch: %s, finished %s, pending %d, processed %d; want done, set, 0, 4", j.State, isoOf(j.FinishedAt), j.Pending, j.Processed)
		}
		if d := b.finishedDeliveries(); len(d) != 1 || !strings.Contains(d[0], `"processed":4`) {
			t.Errorf("backfill.finished owed %v, want once with processed 4", d)
		}
	})
}

// A paused job left with nothing pending (by an older owed, or a pause that raced its last
// batch) settles done at the queue's next pass, at a pause and at a start; one with a suspect
// row still owed its retry, or pending rows, stays paused.
func TestBackfillStuckPausedJobSettles(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		for i, how := range []string{"the queue's pass", "pause", "start"} {
			t.Run(how, func(t *testing.T) {
				b := newBF(t, db)
				n := func(chat string) string { return fmt.Sprintf("%s-%d", chat, i) }
				if i == 0 {
					b.hook() // the subtests share the database, and each delivery is per webhook
				}
				stuck := b.scrape(n("stuck"), "puppet", models.ScrapeDone, paths("/img/s%d.png", 1, 3)...)
				owes := b.scrape(n("owes"), "puppet", models.ScrapeDone, paths("/img/o%d.png", 1, 2)...)
				b.scrape(n("left"), "puppet", models.ScrapeDone, paths("/img/l%d.png", 1, 2)...)
				b.exec(`UPDATE media SET state = 'cached', stored_bytes = 10 WHERE scrape_id = ?`, stuck)
				b.exec(`UPDATE media SET state = 'suspect' WHERE scrape_id = ?`, owes)
				ms := b.clk.Now().UnixMilli()
				ins := `INSERT INTO backfill_jobs (chat_id, guild_id, state, position, processed, per_minute, started_at, finished_at,
					cooldown_ms, stalled, active_at) VALUES (?, ?, 'paused', ?, ?, NULL, ?, NULL, NULL, 0, ?)`
				b.exec(ins, n("stuck"), "g", 1, 3, ms-60000, ms)
				b.exec(ins, n("owes"), "g", 2, 0, ms-60000, ms)
				b.exec(ins, n("left"), "g", 3, 0, ms-60000, ms)
				if j := b.mustJob(b.status(), n("stuck")); j.State != "paused" || j.Pending != 0 {
					t.Fatalf("stuck = %s with %d pending, want the paused row as an older owed left it", j.State, j.Pending)
				}
				switch how {
				case "the queue's pass":
					b.run()
				case "pause":
					if err := b.q.PauseJobs(b.ctx, ""); err != nil {
						t.Fatal(err)
					}
				case "start":
					b.start(n("stuck"))
				}
				st := b.status()
				if j := b.mustJob(st, n("stuck")); j.State != "done" || isoOf(j.FinishedAt) != iso(b.clk.Now()) || j.Processed != 3 {
					t.Errorf("stuck = %s, finished %s, processed %d; want done now, 3", j.State, isoOf(j.FinishedAt), j.Processed)
				}
				for _, chat := range []string{"owes", "left"} {
					if j := b.mustJob(st, n(chat)); j.State != "paused" {
						t.Errorf("%s = %s, want paused: it still owes work", chat, j.State)
					}
				}
				if recs := b.logs.named("backfill finished"); len(recs) != 1 || recs[0].attrs["chatId"] != n("stuck") || recs[0].attrs["paused"] != true {
					t.Errorf("logged %+v, want stuck's finish once, paused", recs)
				}
				var owed []string
				for _, d := range b.finishedDeliveries() {
					for _, chat := range []string{"stuck", "owes", "left"} {
						if strings.Contains(d, `"chatId":"`+n(chat)+`"`) {
							owed = append(owed, chat)
						}
					}
				}
				if len(owed) != 1 || owed[0] != "stuck" {
					t.Errorf("backfill.finished owed for %v, want once for stuck", owed)
				}
			})
		}
	})
}

// processed counts each row once, when it settles. Under steady 429s the seed counted the
// rate-limited row at every 429 and again when it was fetched (a 200-row chat showed 213),
// and a suspect row not at all.
func TestBackfillProcessedNeverExceedsTheRows(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(20, 500)
		b.hook()
		b.cdn.limitEvery, b.cdn.retryAfter = 15, "1"
		rows := append(paths("/steady/%d.png", 1, 200), paths("/flaky/503/%d", 1, 5)...)
		b.scrape("chat-s", "puppet", models.ScrapeDone, rows...)
		b.start("")
		b.run()

		limited := 0
		for _, p := range b.cdn.served() {
			if strings.HasPrefix(p, "/steady/") {
				limited++
			}
		}
		limited -= 200
		if limited < 10 {
			t.Fatalf("%d requests were answered 429; the scenario needs steady 429s", limited)
		}
		j := b.mustJob(b.status(), "chat-s")
		if j.State != "done" || j.Total != 205 || j.Cached != 205 || j.Processed != 205 {
			t.Errorf("job = %s, total %d, cached %d, processed %d; want done, 205, 205, 205 (the seed's count: %d)",
				j.State, j.Total, j.Cached, j.Processed, 200+limited)
		}
		if d := b.finishedDeliveries(); len(d) != 1 || !strings.Contains(d[0], `"processed":205`) {
			t.Errorf("backfill.finished owed %v, want processed 205", d)
		}
	})
}

// startedAt is when a run's first batch began: a queued job, or one waiting out a rate limit
// before its first batch, has not started.
func TestBackfillStartedOnlyOnceItRan(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(10, 0)
		b.scrape("first", "puppet", models.ScrapeDone, "/img/f1.png", "/429h/30/f2", "/img/f3.png")
		b.scrape("second", "puppet", models.ScrapeDone, paths("/img/s%d.png", 1, 4)...)
		b.start("")
		t0 := b.clk.Now()
		st := b.status()
		for _, chat := range []string{"first", "second"} {
			if j := b.mustJob(st, chat); j.StartedAt != nil {
				t.Errorf("%s is %s and started %s before anything ran; want null", chat, j.State, isoOf(j.StartedAt))
			}
		}
		// first hits the 429 at its second row and is paused while it waits; second takes the
		// queue but waits out the same rate limit before its first batch.
		var mu sync.Mutex
		var queued, waiting *scheduler.BackfillJobStatus
		var firstStarted string
		b.setOnSleep(func(time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			if b.engine.RateLimit().Active && queued == nil {
				st := b.status()
				queued = ptrTo(b.mustJob(st, "second"))
				firstStarted = isoOf(b.mustJob(st, "first").StartedAt)
				if err := b.q.PauseJobs(b.ctx, "first"); err != nil {
					t.Error(err)
				}
				return
			}
			if b.engine.RateLimit().Active && waiting == nil {
				if j := b.mustJob(b.status(), "second"); intOf(j.Position) == "0" {
					waiting = &j
				}
			}
		})
		b.run()
		if queued == nil || waiting == nil {
			t.Fatalf("queued %v, waiting %v: the scenario did not happen", queued, waiting)
		}
		if firstStarted != iso(t0) {
			t.Errorf("first started %s, want %s (its first batch)", firstStarted, iso(t0))
		}
		if queued.State != "queued" || queued.StartedAt != nil {
			t.Errorf("second while queued: %s, started %s; want queued, null", queued.State, isoOf(queued.StartedAt))
		}
		// Waiting before its first batch it is not running: queued at the head, starting when
		// the limit lifts.
		if waiting.State != "queued" || waiting.StartedAt != nil || strOf(waiting.WaitsFor) != scheduler.WaitRateLimit ||
			i64(waiting.Wait) == "0" || i64(waiting.EtaStart) != i64(waiting.Wait) {
			t.Errorf("second waiting out the limit before its first batch: %s, started %s, waits for %s (%s ms), starts in %s;"+
				" want queued, null, rate-limit, starting when the wait ends",
				waiting.State, isoOf(waiting.StartedAt), strOf(waiting.WaitsFor), i64(waiting.Wait), i64(waiting.EtaStart))
		}
		j, err := b.store.BackfillJobOf(b.ctx, "second")
		if err != nil {
			t.Fatal(err)
		}
		// The 429 came at 0.5 s (one gap after the first row) with Retry-After 30.
		if lifted := t0.Add(30500 * time.Millisecond); j.State != models.BackfillDone || j.StartedAt == nil || !j.StartedAt.Equal(lifted) {
			t.Errorf("second: %s, started %v; want done, started when the limit lifted (%v)", j.State, j.StartedAt, lifted)
		}
	})
}

// Under steady 429s the measured rate counts the rate-limit waits (from the second on), so the
// ETA says when pending really runs out; a rate over running time alone promised too much.
func TestBackfillRateCountsSteadyRateLimitWaits(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db) // 500 ms between requests
		b.settings(10, 0)
		b.cdn.limitEvery, b.cdn.retryAfter = 20, "3" // 20 requests (10 s), then a 3 s wait
		b.scrape("chat-q", "puppet", models.ScrapeDone, paths("/steady/%d.png", 1, 300)...)
		b.start("")
		var at time.Time
		var sample *scheduler.BackfillJobStatus
		b.cdn.onHit = func(p string) {
			if p == "/steady/150.png" && sample == nil {
				at = b.clk.Now()
				sample = ptrTo(b.mustJob(b.status(), "chat-q"))
			}
		}
		b.run()
		if sample == nil || sample.Eta == nil || !sample.RateMeasured {
			t.Fatalf("sample = %+v, want a measured rate and an ETA halfway", sample)
		}
		actual := b.clk.Now().Sub(at)
		errOf := func(predicted time.Duration) float64 {
			return math.Abs(float64(predicted-actual)) / float64(actual)
		}
		if e := errOf(*sample.Eta); e > 0.10 {
			t.Errorf("ETA halfway %v, actual %v: %.1f %% off, want within 10 %%", *sample.Eta, actual, 100*e)
		}
		j, err := b.store.BackfillJobOf(b.ctx, "chat-q")
		if err != nil {
			t.Fatal(err)
		}
		// The test can fail: over running time alone the same sample promised far too much.
		runOnly := time.Duration(float64(sample.Pending) / (float64(j.RunRows) * 60000 / float64(j.RunMs)) * float64(time.Minute))
		if e := errOf(runOnly); e < 0.15 {
			t.Errorf("without the waits the ETA would be %v, only %.1f %% off; the scenario does not tell", runOnly, 100*e)
		}
		if j.RunWaits < models.WaitsCountFrom || j.RunWaitMs != 3000*j.RunWaits {
			t.Errorf("%d waits, %d ms; want 3000 ms each, at least %d", j.RunWaits, j.RunWaitMs, models.WaitsCountFrom)
		}
		js := b.mustJob(b.status(), "chat-q")
		want := math.Floor(float64(j.RunRows)*60000/float64(j.RunMs+j.RunWaitMs)*10+0.5) / 10
		if js.WaitedMs != j.RunWaitMs || js.PerMinute != want {
			t.Errorf("status: waited %d ms, perMinute %v; want %d, %v", js.WaitedMs, js.PerMinute, j.RunWaitMs, want)
		}
	})
}
