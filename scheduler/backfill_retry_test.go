package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// bfHit is one request the CDN answered: its path, which request to that path it was, and the
// queue's clock when it came.
type bfHit struct {
	path string
	n    int
	at   time.Time
}

// recordHits keeps every CDN request with the clock, and calls also (when not nil) on each.
func (b *bf) recordHits(also func(h bfHit)) func() []bfHit {
	var mu sync.Mutex
	var hits []bfHit
	b.cdn.onHit = func(p string) {
		h := bfHit{path: p, n: b.cdn.hitsOf(p), at: b.clk.Now()}
		mu.Lock()
		hits = append(hits, h)
		mu.Unlock()
		if also != nil {
			also(h)
		}
	}
	return func() []bfHit {
		mu.Lock()
		defer mu.Unlock()
		return append([]bfHit(nil), hits...)
	}
}

// stalledOf reads chat's job's stall count as the store keeps it.
func (b *bf) stalledOf(chat string) int {
	j, err := b.store.BackfillJobOf(context.Background(), chat)
	if err != nil {
		b.t.Errorf("job of %s: %v", chat, err)
	}
	return j.Stalled
}

// Suspect rows a batch's own retry did not reach get theirs in retry passes once nothing is
// pending: each pass first waits the raised cooldown, takes half a batch in row order, and
// counts as a stall only when it settled no row (here every pass settles two: cached and
// failed, cached and unverified). Only failed rows log a "media failed" line.
func TestBackfillRetryPassesWaitTheCooldownAndStallOnlyWhenNothingSettles(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(4, 0)
		s := func(answers string, n int) string { return fmt.Sprintf("/seq/503,%s/%d", answers, n) }
		rows := []string{
			s("200", 1), s("200", 2), s("200", 3), s("200", 4), // batch 1: all suspect
			"/img/1.png", "/img/2.png", "/img/3.png", "/img/4.png", // batch 2
			s("200", 5), s("200", 6), s("200", 7), s("g", 8), // batch 3: all suspect
			"/img/5.png", "/img/6.png", "/img/7.png", "/img/8.png", // batch 4
			s("200", 9), s("404", 10), s("200", 11), s("g", 12), // batch 5: all suspect
		}
		id := b.scrape("chat-p", "puppet", models.ScrapeDone, rows...)
		b.start("")
		stalls := map[string]int{} // the stall count as the pass starting at this row began
		hits := b.recordHits(func(h bfHit) {
			if h.n == 2 && (h.path == s("200", 9) || h.path == s("200", 11)) {
				stalls[h.path] = b.stalledOf("chat-p")
			}
		})
		b.run()

		order := b.cdn.served()
		want := append(append([]string(nil), rows[0:4]...), rows[0:2]...) // batch 1, its retry
		want = append(want, rows[4:8]...)                                 // batch 2
		want = append(want, rows[8:12]...)                                // batch 3
		want = append(want, rows[2:4]...)                                 // its retry: the oldest suspects
		want = append(want, rows[12:16]...)                               // batch 4 (no suspect: no retry)
		want = append(want, rows[16:20]...)                               // batch 5
		want = append(want, rows[8:10]...)                                // its retry
		want = append(want, rows[10:12]...)                               // retry pass 1
		want = append(want, rows[16:18]...)                               // retry pass 2
		want = append(want, rows[18:20]...)                               // retry pass 3
		if !reflect.DeepEqual(order, want) {
			t.Fatalf("requests in the order\n%v\nwant\n%v", order, want)
		}
		// Batch 5 (all suspect) stalled once; the passes after it each settled rows.
		if stalls[s("200", 9)] != 0 || stalls[s("200", 11)] != 0 {
			t.Errorf("stall count after retry passes 1 and 2 = %d, %d; want 0, 0 (each settled two rows)",
				stalls[s("200", 9)], stalls[s("200", 11)])
		}
		// The cooldown batches 1, 3 and 5 raised (60 s, 120 s, 240 s) holds for the passes:
		// each waits 240 s after the request before it.
		all := hits()
		for i := len(all) - 6; i < len(all); i += 2 {
			if gap := all[i].at.Sub(all[i-1].at); gap < 240*time.Second {
				t.Errorf("retry pass at %s began %v after the request before it, want at least the 240 s cooldown", all[i].path, gap)
			}
		}
		j := b.mustJob(b.status(), "chat-p")
		if j.State != "done" || j.Members[0].Unverified != 1 || j.Members[0].Suspect != 0 {
			t.Errorf("job = %s, member %+v; want done, 1 unverified, no suspect", j.State, j.Members[0])
		}
		if got := b.stalledOf("chat-p"); got != 0 {
			t.Errorf("stall count at the end = %d, want 0", got)
		}
		states := b.rowStates(id)
		var failed []any
		for _, r := range b.logs.named("backfill media failed") {
			failed = append(failed, r.attrs["status"])
		}
		if states[s("g", 8)] != "failed" || states[s("g", 12)] != "failed" || len(failed) != 2 {
			t.Errorf("rows 8 and 12 %s and %s, %d lines say a row failed; want both failed and 2 lines",
				states[s("g", 8)], states[s("g", 12)], len(failed))
		}
		b.checkCounters()
	})
}

// Retry passes that settle nothing (the rows stay suspect behind a rate limit) are stalls: with
// the batch that made the suspects, the second such pass is the third stall in a row and
// pauses the job, suspects and all.
func TestBackfillRetryPassesThatSettleNothingPauseTheJob(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(2, 0)
		first, second := "/seq/503,429/1", "/seq/503,429/2"
		b.scrape("chat-z", "puppet", models.ScrapeDone, first, second)
		b.start("")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.recordHits(func(h bfHit) {
			if h.n > 8 {
				cancel() // a queue that never pauses the job: stop it, the counts below fail
			}
		})
		if err := b.q.RunQueue(ctx); err != nil {
			t.Fatal(err)
		}
		// first: the batch, its own retry (429: the rest of that retry waits), two passes.
		if got := b.cdn.hitsOf(first); got != 4 {
			t.Errorf("%s fetched %d times, want 4 (batch, its retry, two passes)", first, got)
		}
		if got := b.cdn.hitsOf(second); got != 1 {
			t.Errorf("%s fetched %d times, want 1 (each retry stops at the first 429)", second, got)
		}
		j := b.mustJob(b.status(), "chat-z")
		if j.State != "paused" || j.Members[0].Suspect != 2 {
			t.Errorf("job = %s, member %+v; want paused with 2 suspect", j.State, j.Members[0])
		}
		if n := len(b.logs.named("backfill made no progress; job paused")); n != 1 {
			t.Errorf("%d lines say the job was paused for making no progress, want 1", n)
		}
	})
}

// A process that loses the queue lease during a retry pass writes nothing more to the job:
// the pass records no stall, and the queue stops.
func TestBackfillLeaseLostInARetryPassRecordsNothing(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(4, 0)
		rows := []string{"/seq/503,200/1", "/seq/503,200/2", "/seq/503,200/3", "/seq/503,200/4"}
		b.scrape("chat-l", "puppet", models.ScrapeDone, rows...)
		b.start("")
		before := -1
		b.recordHits(func(h bfHit) {
			// The batch takes all four, its retry rows 1 and 2, the retry pass 3 and 4.
			if h.path == rows[2] && h.n == 2 {
				before = b.stalledOf("chat-l")
				b.exec(`UPDATE backfill_runner SET owner = 'proc-b', lease_until = ?`, b.clk.Now().Add(time.Hour).UnixMilli())
				b.clk.Advance(time.Minute) // past a third of the lease: the next record renews it
			}
		})
		b.run()
		if before < 0 {
			t.Fatal("no retry pass fetched row 3")
		}
		if got := b.stalledOf("chat-l"); got != before {
			t.Errorf("stall count %d after the lease was lost, was %d: the pass recorded itself", got, before)
		}
		if recs := b.logs.named("backfill lease lost; another process runs the queue"); len(recs) != 1 {
			t.Errorf("logged %d lease losses, want 1", len(recs))
		}
		if n := b.cdn.hitsOf(rows[3]); n != 1 {
			t.Errorf("%s fetched %d times, want once (its retry is the other process's)", rows[3], n)
		}
	})
}

// The measured rate counts every row a batch took off pending, suspects included: with one
// suspect in every batch of ten, it is the rows over the running time, not the cached ones.
func TestBackfillRateCountsSuspects(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db, withRateWindow(-1)) // the plain rate: rows over running time
		b.settings(10, 0)
		var rows []string
		for i := 1; i <= 100; i++ {
			if i%10 == 5 {
				rows = append(rows, fmt.Sprintf("/seq/503,200/%d", i))
			} else {
				rows = append(rows, fmt.Sprintf("/img/%d.png", i))
			}
		}
		b.scrape("chat-r", "puppet", models.ScrapeDone, rows...)
		b.start("")
		t0 := b.clk.Now()
		b.run()
		ran := b.clk.Now().Sub(t0)
		all := float64(100) * float64(time.Minute) / float64(ran)
		j := b.mustJob(b.status(), "chat-r")
		// The running time leaves out only the last retry (one request): within 2 %.
		if !j.RateMeasured || j.PerMinute < all || j.PerMinute > all*1.02 {
			t.Errorf("perMinute %v (measured %v), want 100 rows over %v: %.1f to %.1f", j.PerMinute, j.RateMeasured, ran, all, all*1.02)
		}
	})
}

// A row deleted while its preview was being fetched leaves no preview behind: the queue
// removes the orphan it made.
func TestBackfillRemovesThePreviewOfARowDeletedMeanwhile(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(2, 0)
		id := b.scrape("chat-o", "puppet", models.ScrapeDone, "/img/1.png", "/img/2.png")
		rows, err := b.store.ListMedia(b.ctx, id, "", 0, 10)
		if err != nil || len(rows) != 2 {
			t.Fatalf("rows = %v, %v", rows, err)
		}
		b.start("")
		b.cdn.onHit = func(p string) {
			if p == "/img/1.png" {
				if err := b.store.DeleteMedia(context.Background(), []int64{rows[0].ID}); err != nil {
					t.Error(err)
				}
			}
		}
		b.run()
		if _, err := os.Stat(b.engine.PreviewPath(rows[0].ID)); !os.IsNotExist(err) {
			t.Errorf("the deleted row's preview: %v, want none", err)
		}
		if _, err := os.Stat(b.engine.PreviewPath(rows[1].ID)); err != nil {
			t.Errorf("the other row's preview: %v", err)
		}
		if n := len(b.logs.named("backfill remove orphan preview")); n != 0 {
			t.Errorf("%d warnings about removing the orphan, want none", n)
		}
	})
}

// One pass of the deletes carries out every delete asked for, each logged once with its rows;
// previews that were never made are no reason to warn.
func TestScrapeDeletesAllAskedForInOnePass(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(10, 0)
		one := b.scrape("chat-d", "puppet", models.ScrapeDone, "/img/1.png", "/video/2")
		two := b.scrape("chat-d", "puppet", models.ScrapeDone, "/img/3.png", "/img/4.png", "/img/5.png")
		b.start("")
		b.run()
		for _, id := range []int64{one, two} {
			if _, err := b.store.RequestScrapeDelete(b.ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.q.RunDeletes(b.ctx); err != nil {
			t.Fatal(err)
		}
		for _, id := range []int64{one, two} {
			if sc, err := b.store.ScrapeByID(b.ctx, id); err != nil || sc.State != models.ScrapeDeleted {
				t.Errorf("scrape %d = %s, %v; want deleted", id, sc.State, err)
			}
		}
		var media []any
		for _, r := range b.logs.named("scrape deleted") {
			media = append(media, r.attrs["media"])
		}
		if !reflect.DeepEqual(media, []any{int64(2), int64(3)}) {
			t.Errorf("scrape deleted lines with media %v, want [2 3]", media)
		}
		if n := len(b.logs.named("scrape delete: remove preview")); n != 0 {
			t.Errorf("%d warnings about removing previews, want none (the video row never had one)", n)
		}
		b.checkCounters()
	})
}

// The backfill gauges follow each batch, without anyone asking for the status.
func TestBackfillGaugesFollowEachBatch(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(2, 0)
		b.scrape("chat-g", "puppet", models.ScrapeDone, paths("/img/%d.png", 1, 6)...)
		b.start("")
		var pending []float64
		b.cdn.onHit = func(p string) {
			if p == "/img/3.png" || p == "/img/5.png" {
				var m dto.Metric
				if err := b.metrics.Backfill.WithLabelValues("pending").Write(&m); err != nil {
					t.Error(err)
				}
				pending = append(pending, m.GetGauge().GetValue())
			}
		}
		b.run()
		if !reflect.DeepEqual(pending, []float64{4, 2}) {
			t.Errorf("pending gauge before batches 2 and 3 = %v, want [4 2]", pending)
		}
		if n := len(b.logs.named("backfill gauges")); n != 0 {
			t.Errorf("%d warnings about the gauges, want none", n)
		}
	})
}
