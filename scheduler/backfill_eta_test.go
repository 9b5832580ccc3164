package scheduler_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// The run order on fixed figures: the runner's job is position 0 and starts now (after the
// rate limit in hand, which every scheduled ETA includes); queued jobs follow in start order,
// each after the jobs ahead; a paused job — even one ahead in the order, with a rate of 0 — is
// out of the schedule and delays nobody; idle and done jobs have no position.
func TestBackfillScheduleFollowsTheRunOrder(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db) // 500 ms a row, no pause: an estimate of 120 a minute
		b.settings(10, 0)
		ms := b.clk.Now().UnixMilli()
		b.scrape("paused-ahead", "puppet", models.ScrapeDone, paths("/img/p%d.png", 1, 40)...)
		b.scrape("runner", "puppet", models.ScrapeDone, paths("/img/r%d.png", 1, 200)...)
		b.scrape("next", "puppet", models.ScrapeDone, paths("/img/n%d.png", 1, 50)...)
		b.scrape("last", "slopbot", models.ScrapeDone, paths("/img/l%d.png", 1, 25)...)
		b.scrape("idle", "puppet", models.ScrapeDone, paths("/img/i%d.png", 1, 10)...)
		ins := `INSERT INTO backfill_jobs (chat_id, guild_id, state, position, processed, per_minute, started_at, finished_at,
			cooldown_ms, stalled, active_at, run_ms, run_rows) VALUES (?, NULL, ?, ?, ?, ?, ?, NULL, NULL, 0, ?, ?, ?)`
		b.exec(ins, "paused-ahead", "paused", 1, 0, 0.0, ms-600000, ms, 40000, 0)
		b.exec(ins, "runner", "running", 2, 100, 100.0, ms-60000, ms, 60000, 100)
		b.exec(ins, "next", "running", 3, 0, nil, ms-60000, ms, 0, 0)
		b.exec(ins, "last", "running", 4, 0, nil, ms-60000, ms, 0, 0)
		// The runner is on "runner" and waits out a rate limit for 30 s more.
		b.exec(`UPDATE backfill_runner SET owner = 'proc-a', lease_until = ?, chat_id = 'runner', limited_until = ?`, ms+60000, ms+30000)

		st := b.status()
		type figs struct{ state, position, start, run, total, eta, waitMs, waitsFor string }
		want := map[string]figs{
			// 200 rows at 100 a minute: 120 s, after the 30 s limit.
			"runner": {"running", "0", "0", "120000", "150000", "150000", "30000", "rate-limit"},
			// Queued jobs take the running job's rate (100 a minute), not the 120 estimate.
			"next":         {"queued", "1", "150000", "30000", "180000", "30000", "30000", "queue"},
			"last":         {"queued", "2", "180000", "15000", "195000", "15000", "30000", "queue"},
			"paused-ahead": {"paused", "null", "null", "24000", "null", "24000", "null", "null"},
			"idle":         {"idle", "null", "null", "6000", "null", "6000", "null", "null"},
		}
		for chat, w := range want {
			j := b.mustJob(st, chat)
			got := figs{j.State, intOf(j.Position), i64(j.EtaStart), i64(j.EtaRun), i64(j.EtaTotal), i64(j.Eta), i64(j.Wait), strOf(j.WaitsFor)}
			if got != w {
				t.Errorf("%s:\n got  %+v\n want %+v", chat, got, w)
			}
		}
		// A measured 0 is no rate to divide by: the paused job shows the running job's.
		if j := b.mustJob(st, "paused-ahead"); j.PerMinute != 100 || j.RateMeasured {
			t.Errorf("paused-ahead perMinute %v (measured %v), want 100 borrowed", j.PerMinute, j.RateMeasured)
		}
		if got := i64(st.Totals.EtaTotal); got != "195000" {
			t.Errorf("totals etaTotalMs = %s, want 195000: the end of the last scheduled job", got)
		}

		// The limit lifts: nothing is added any more.
		b.clk.Advance(30 * time.Second)
		b.exec(`UPDATE backfill_runner SET limited_until = NULL`)
		st = b.status()
		if j := b.mustJob(st, "runner"); i64(j.EtaTotal) != "120000" || i64(j.Wait) != "0" || j.WaitsFor != nil {
			t.Errorf("runner after the limit: total %s, wait %s, waitsFor %s; want 120000, 0, null", i64(j.EtaTotal), i64(j.Wait), strOf(j.WaitsFor))
		}
		if j := b.mustJob(st, "next"); i64(j.EtaStart) != "120000" {
			t.Errorf("next starts in %s, want 120000", i64(j.EtaStart))
		}
	})
}

// The totals' rate is that of the first running job (in the run order) with a non-zero
// measured rate: not a paused job's, not a running job's zero, not a later running job's.
func TestBackfillTotalsTakeTheFirstRunningNonZeroRate(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(10, 0)
		ms := b.clk.Now().UnixMilli()
		for _, c := range []string{"paused", "zero", "first", "later"} {
			b.scrape(c, "puppet", models.ScrapeDone, paths("/img/"+c+"%d.png", 1, 60)...)
		}
		ins := `INSERT INTO backfill_jobs (chat_id, guild_id, state, position, processed, per_minute, started_at, finished_at,
			cooldown_ms, stalled, active_at) VALUES (?, NULL, ?, ?, 0, ?, ?, NULL, NULL, 0, ?)`
		b.exec(ins, "paused", "paused", 1, 70.0, ms, ms)
		b.exec(ins, "zero", "running", 2, 0.0, ms, ms)
		b.exec(ins, "first", "running", 3, 90.0, ms, ms)
		b.exec(ins, "later", "running", 4, 50.0, ms, ms)
		tot := b.status().Totals
		if tot.PerMinute != 90 || i64(tot.EtaRun) != "160000" {
			t.Errorf("totals rate %v, run %s; want 90 (the first running job's non-zero rate), 160000", tot.PerMinute, i64(tot.EtaRun))
		}
		// With no running job measured, the estimate (120 a minute).
		b.exec(`UPDATE backfill_jobs SET per_minute = NULL WHERE state = 'running'`)
		if tot := b.status().Totals; tot.PerMinute != 120 {
			t.Errorf("totals rate %v without a measured running job, want the estimate 120", tot.PerMinute)
		}
	})
}

// A job's measured rate counts only its running time: not the time it was queued behind
// another job, nor the walk and the rate limit it waited out midway.
func TestBackfillRateCountsRunningTimeOnly(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db) // 500 ms between requests
		b.settings(10, 0)
		b.scrape("first", "puppet", models.ScrapeDone, paths("/img/f%d.png", 1, 20)...)
		second := paths("/img/s%d.png", 1, 70)
		second[49] = "/429h/60/s50" // a 429 with Retry-After 60 s, then a PNG
		b.scrape("second", "puppet", models.ScrapeDone, second...)
		b.start("")
		t0 := b.clk.Now()
		var once sync.Once
		b.cdn.onHit = func(p string) {
			if p == "/img/s30.png" {
				// A walk starts: it holds the lock for 10 min after the batch.
				once.Do(func() { b.scrape("walker", "puppet", models.ScrapeActive, "/img/w1.png") })
			}
		}
		b.run()

		// first: 20 rows from t0 to 9.5 s. second, queued meanwhile, runs from 9.5 s: rows 1-30
		// until 24.5 s (15 s); the walk holds the queue to 624.5 s; rows 31-49 and the 429
		// until 634 s (9.5 s); the limit holds to 694 s; row 50 again and 51-70 until 704 s
		// (10 s). Running time 34.5 s for 70 rows: 121.7 a minute.
		j, err := b.store.BackfillJobOf(b.ctx, "second")
		if err != nil {
			t.Fatal(err)
		}
		// processed counts the 429's row once, when it settled (the seed counted it twice: 71).
		if j.RunMs != 34500 || j.RunRows != 70 || j.Processed != 70 {
			t.Errorf("second: run %d ms, %d rows, processed %d; want 34500 ms, 70 rows, 70 processed", j.RunMs, j.RunRows, j.Processed)
		}
		// One wait is an incident: kept, but not counted in the rate (models.WaitsCountFrom).
		if j.RunWaits != 1 || j.RunWaitMs != 60000 || j.CountedWaitMs() != 0 {
			t.Errorf("second: %d waits of %d ms, %d counted; want 1 of 60000, none counted", j.RunWaits, j.RunWaitMs, j.CountedWaitMs())
		}
		if got := b.clk.Now().Sub(t0); got != 704*time.Second {
			t.Errorf("the run ended %v after the start, want 704s (the scenario above)", got)
		}
		js := b.mustJob(b.status(), "second")
		if js.State != "done" || !js.RateMeasured || js.PerMinute != 121.7 {
			t.Errorf("second: %s, perMinute %v (measured %v); want done, 121.7 measured (over wall time it would be 6)", js.State, js.PerMinute, js.RateMeasured)
		}
		if f, _ := b.store.BackfillJobOf(b.ctx, "first"); f.RunMs != 9500 || f.PerMinute != nil {
			t.Errorf("first: run %d ms, perMinute %v; want 9500 and none measured (under 30 s)", f.RunMs, f.PerMinute)
		}
	})
}

// The cooldown follows only a batch that progressed or had suspects: a batch stopped by a 429
// at its first row goes straight on to the rate-limit wait; a batch of suspects alone cools
// down before their retry.
func TestBackfillCooldownOnlyAfterProgressOrSuspects(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		t.Run("nothing progressed", func(t *testing.T) {
			b := newBF(t, db)
			b.settings(10, 7000)
			b.scrape("chat-l", "puppet", models.ScrapeDone, "/429h/2/1", "/img/2.png")
			b.start("")
			t0 := b.clk.Now()
			hits := b.hitTimes()
			b.run()
			// The 429 at t0 (limit 2 s); without a cooldown the row is fetched again at 2 s,
			// with one at 7 s.
			if got := hits("/429h/2/1"); len(got) != 2 || got[1].Sub(t0) != 2*time.Second {
				t.Errorf("the limited row was fetched at %v, want at 0 s and 2 s", offsets(got, t0))
			}
		})
		t.Run("suspects only", func(t *testing.T) {
			b := newBF(t, db)
			b.settings(10, 7000)
			b.scrape("chat-s", "puppet", models.ScrapeDone, paths("/status/404/%d", 1, 3)...)
			b.start("")
			t0 := b.clk.Now()
			hits := b.hitTimes()
			b.run()
			// Three suspects at 0, 0.5 and 1 s (below the raise threshold of 7): the 7 s
			// cooldown, then their retry at 8 s.
			if got := hits("/status/404/1"); len(got) != 2 || got[1].Sub(t0) != 8*time.Second {
				t.Errorf("the suspect row was fetched at %v, want at 0 s and 8 s", offsets(got, t0))
			}
		})
	})
}

// hitTimes records when the CDN served each path (on the fake clock) and returns a lookup.
func (b *bf) hitTimes() func(path string) []time.Time {
	var mu sync.Mutex
	at := map[string][]time.Time{}
	b.cdn.onHit = func(p string) {
		mu.Lock()
		at[p] = append(at[p], b.clk.Now())
		mu.Unlock()
	}
	return func(p string) []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), at[p]...)
	}
}

func offsets(ts []time.Time, t0 time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(t0)
	}
	return out
}

// The two rate models when the CDN slows down midway (500 ms a row for 60 rows, then 1 s for
// 180): the plain rate is every row over all the running time; the smoothed one, an
// exponentially weighted mean over running time (1 min), follows the recent pace.
func TestBackfillRateModelsWhenTheCDNSlows(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		for _, c := range []struct {
			name     string
			window   time.Duration
			min, max float64
		}{
			// 240 rows over 209.5 s of running time.
			{"plain", -1, 68.7, 68.7},
			// 120 a minute weighted by e^-3 (180 s ago), 60 by the rest: about 63.
			{"smoothed", time.Minute, 62, 64},
		} {
			t.Run(c.name, func(t *testing.T) {
				b := newBF(t, db, withRateWindow(c.window))
				b.settings(10, 0)
				b.scrape("chat-s", "puppet", models.ScrapeDone, paths("/img/%d.png", 1, 240)...)
				b.start("")
				b.cdn.onHit = func(p string) {
					if p == "/img/60.png" {
						if err := b.engine.SetGaps(time.Second, time.Second); err != nil {
							t.Error(err)
						}
					}
				}
				b.run()
				j, err := b.store.BackfillJobOf(b.ctx, "chat-s")
				if err != nil {
					t.Fatal(err)
				}
				if j.RunMs != 209500 || j.RunRows != 240 || j.PerMinute == nil || j.RecentPerMinute == nil {
					t.Fatalf("run %d ms, %d rows, perMinute %v, recent %v; want 209500, 240, both rates", j.RunMs, j.RunRows, j.PerMinute, j.RecentPerMinute)
				}
				if got := math.Round(*j.PerMinute*10) / 10; got < c.min || got > c.max {
					t.Errorf("perMinute %.2f, want %v to %v", *j.PerMinute, c.min, c.max)
				}
				if c.window > 0 && *j.PerMinute != *j.RecentPerMinute {
					t.Errorf("the smoothed model reports %v, not the smoothed rate %v", *j.PerMinute, *j.RecentPerMinute)
				}
			})
		}
	})
}

// A job that has not run 30 s yet goes on at the pace of the job that worked last, not at the
// settings' estimate: the same engine and CDN serve both.
func TestBackfillNewJobTakesTheLastMeasuredRate(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db) // an estimate of 120 a minute
		b.settings(10, 0)
		ms := b.clk.Now().UnixMilli()
		b.scrape("older", "puppet", models.ScrapeDone, "/img/o1.png")
		b.scrape("before", "puppet", models.ScrapeDone, "/img/b1.png")
		b.scrape("now", "puppet", models.ScrapeDone, paths("/img/n%d.png", 1, 90)...)
		ins := `INSERT INTO backfill_jobs (chat_id, guild_id, state, position, processed, per_minute, started_at, finished_at,
			cooldown_ms, stalled, active_at, run_ms, run_rows) VALUES (?, NULL, ?, ?, 0, ?, ?, ?, NULL, 0, ?, 0, 0)`
		b.exec(ins, "older", "done", 1, 30.0, ms-300000, ms-200000, ms-200000)
		b.exec(ins, "before", "done", 2, 45.0, ms-100000, ms-10000, ms-10000)
		b.exec(ins, "now", "running", 3, nil, ms-10000, nil, ms)
		j := b.mustJob(b.status(), "now")
		if j.PerMinute != 45 || j.RateMeasured || i64(j.EtaTotal) != "120000" {
			t.Errorf("now: perMinute %v (measured %v), total %s; want 45 borrowed from the job before, 120000", j.PerMinute, j.RateMeasured, i64(j.EtaTotal))
		}
	})
}
