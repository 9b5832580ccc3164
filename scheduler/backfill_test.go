package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/scheduler"
	"github.com/owed/owed/webhooks"
)

func iso(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// i64 shows a duration of the status in whole ms, as the API does.
func i64(p *time.Duration) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(p.Milliseconds())
}

// isoOf shows a time of the status as the API does.
func isoOf(p *time.Time) string {
	if p == nil {
		return "null"
	}
	return iso(*p)
}

func intOf(p *int) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

func strOf(p *string) string {
	if p == nil {
		return "null"
	}
	return *p
}

// Every outcome the engine can give lands on its row: images and gifs cached with their
// previews stored, video and audio skipped unfetched, undecodable content and plain 4xx
// failed, 403/404/410/5xx and timeouts suspect, then retried once: still failing, unverified;
// recovering, cached.
func TestBackfillPreviewsEveryOutcome(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db, withTimeout(time.Second))
		b.settings(20, 1000)
		want := map[string]string{
			"/img/1.png": "cached", "/img/2.png": "cached", "/gif/3.gif": "cached",
			"/video/4": "skipped", "/audio/5": "skipped",
			"/garbage/6": "failed", "/status/400/7": "failed",
			"/status/403/8": "unverified", "/status/404/9": "unverified", "/status/410/10": "unverified",
			"/status/500/11": "unverified", "/status/503/12": "unverified", "/slow/13": "unverified",
			"/flaky/503/14": "cached", "/flaky/404/15": "cached",
		}
		order := []string{"/img/1.png", "/img/2.png", "/gif/3.gif", "/video/4", "/audio/5", "/garbage/6", "/status/400/7",
			"/status/403/8", "/status/404/9", "/status/410/10", "/status/500/11", "/status/503/12", "/slow/13",
			"/flaky/503/14", "/flaky/404/15"}
		id := b.scrape("chat-a", "puppet", models.ScrapeDone, order...)
		b.start("")
		if j := b.mustJob(b.status(), "chat-a"); j.State != "running" || j.Pending != 15 {
			t.Fatalf("started job = %s with %d pending, want running with 15", j.State, j.Pending)
		}
		b.run()

		if got := b.rowStates(id); !reflect.DeepEqual(got, want) {
			t.Errorf("row states:\n got  %v\n want %v", got, want)
		}
		for p, state := range want {
			hits := b.cdn.hitsOf(p)
			switch {
			case kindOf(p) == models.MediaVideo || kindOf(p) == models.MediaAudio:
				if hits != 0 {
					t.Errorf("%s fetched %d times; video and audio have no preview", p, hits)
				}
			case state == "unverified" || p[:6] == "/flaky":
				if hits != 2 {
					t.Errorf("%s fetched %d times, want 2 (one suspect retry)", p, hits)
				}
			default:
				if hits != 1 {
					t.Errorf("%s fetched %d times, want 1", p, hits)
				}
			}
		}
		cached, err := b.store.ListMedia(b.ctx, id, models.MediaCached, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var stored int64
		for _, m := range cached {
			info, err := os.Stat(b.engine.PreviewPath(m.ID))
			if err != nil || info.Size() != m.StoredBytes || m.StoredBytes == 0 {
				t.Errorf("preview of %s: %v, size %v, stored %d", m.URL, err, info, m.StoredBytes)
			}
			stored += m.StoredBytes
		}

		j := b.mustJob(b.status(), "chat-a")
		if j.State != "done" || j.FinishedAt == nil || j.Pending != 0 || j.Cached != 5 || j.Failed != 2 || j.Skipped != 2 ||
			j.Total != 15 || j.Bytes != stored {
			t.Errorf("job = %+v", j)
		}
		// Every row settled once: 3 cached, 2 skipped, 2 failed in the batch; the 8 suspects at
		// their retry (2 cached, 6 unverified).
		if j.Processed != 15 {
			t.Errorf("processed = %d, want 15", j.Processed)
		}
		m := j.Members[0]
		if m.ScrapeID != id || m.Unverified != 6 || m.Suspect != 0 || m.Backend != "puppet" || m.Mode != "history" || m.State != "done" {
			t.Errorf("member = %+v", m)
		}
		if j.Eta != nil || j.EtaStart != nil || j.EtaTotal != nil || i64(j.EtaRun) != "0" {
			t.Errorf("a done job's ETAs = %s %s %s %s, want null null 0 null", i64(j.Eta), i64(j.EtaStart), i64(j.EtaRun), i64(j.EtaTotal))
		}
		if got := len(b.logs.named("backfill batch")); got != 1 {
			t.Errorf("%d batch log lines, want 1", got)
		}
		b.checkCounters()
	})
}

// A 429 stops the batch with its row left pending; the queue shows limitedUntil, waits out
// Retry-After (or a JSON retry_after) and carries on.
func TestBackfillWaitsOutRateLimits(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		for _, c := range []struct {
			name, path string
			wait       time.Duration
		}{
			{"Retry-After header", "/429h/120/1", 120 * time.Second},
			{"JSON retry_after", "/429j/2.5/1", 2500 * time.Millisecond},
		} {
			t.Run(c.name, func(t *testing.T) {
				b := newBF(t, db)
				b.settings(10, 0)
				id := b.scrape("chat-r", "slopbot", models.ScrapeDone, c.path, "/img/2.png")
				b.start("")
				t0 := b.clk.Now()
				var during *scheduler.BackfillStatus
				var limitedGauge float64
				b.setOnSleep(func(time.Duration) {
					if during == nil {
						// The gauge first: the runner sets it as it starts waiting, before any
						// status read sets it again.
						var m dto.Metric
						b.metrics.Backfill.WithLabelValues("rate_limited").Write(&m)
						limitedGauge = m.GetGauge().GetValue()
						st := b.status()
						during = &st
					}
				})
				b.run()

				if got, want := b.cdn.served(), []string{c.path, c.path, "/img/2.png"}; !reflect.DeepEqual(got, want) {
					t.Errorf("served %v, want %v: the batch stops at the 429", got, want)
				}
				if during == nil {
					t.Fatal("the queue never waited")
				}
				if got := isoOf(during.LimitedUntil); got != iso(t0.Add(c.wait)) {
					t.Errorf("limitedUntil while waiting = %s, want %s", got, iso(t0.Add(c.wait)))
				}
				if limitedGauge != 1 {
					t.Errorf("rate_limited gauge while waiting = %v, want 1", limitedGauge)
				}
				if now := b.clk.Now(); now.Before(t0.Add(c.wait)) {
					t.Errorf("the queue went on at %v, before the limit lifted at %v", now, t0.Add(c.wait))
				}
				if got := b.rowStates(id); got[c.path] != "cached" || got["/img/2.png"] != "cached" {
					t.Errorf("rows = %v, want both cached", got)
				}
				st := b.status()
				j := b.mustJob(st, "chat-r")
				// The rate-limited row is counted once, when it settles (the seed counted it at the
				// 429 too, and again when fetched: 3 for 2 rows).
				if j.State != "done" || j.Processed != 2 {
					t.Errorf("job = %s, processed %d; want done, 2", j.State, j.Processed)
				}
				if st.LimitedUntil != nil {
					t.Errorf("limitedUntil after the run = %s, want null", *st.LimitedUntil)
				}
			})
		}
	})
}

// Start all takes the jobs smallest first; they run one at a time in that order, the others
// showing queued; ETAs add up along the order.
func TestBackfillRunsOneJobAtATimeSmallestFirst(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(2, 0)
		b.scrape("big", "puppet", models.ScrapeDone, paths("/img/b%d.png", 1, 5)...)
		b.scrape("small", "puppet", models.ScrapePaused, paths("/img/s%d.png", 1, 2)...)
		b.scrape("mid", "slopbot", models.ScrapeFailed, paths("/img/m%d.png", 1, 3)...)
		b.start("")

		// Before the runner claims a job, the first in the run order shows running (the runner
		// takes it next) and the others queued behind it.
		st := b.status()
		var listed []string
		for _, j := range st.Jobs {
			listed = append(listed, j.ChatID)
			want := map[string]string{"small": "running", "mid": "queued", "big": "queued"}[j.ChatID]
			if j.State != want {
				t.Errorf("%s = %s before the queue runs, want %s", j.ChatID, j.State, want)
			}
		}
		if !reflect.DeepEqual(listed, []string{"big", "mid", "small"}) {
			t.Errorf("jobs listed %v, want by pending, most first", listed)
		}
		// 500 ms a row, no pause: 120 rows a minute. Order: small (2), mid (3), big (5).
		for chat, want := range map[string][3]string{"small": {"0", "1000", "1000"}, "mid": {"1000", "1500", "2500"}, "big": {"2500", "2500", "5000"}} {
			j := b.mustJob(st, chat)
			if got := [3]string{i64(j.EtaStart), i64(j.EtaRun), i64(j.EtaTotal)}; got != want {
				t.Errorf("%s ETAs (start, run, total) = %v, want %v", chat, got, want)
			}
		}

		var mu sync.Mutex
		var snaps []map[string]string
		b.cdn.onHit = func(string) {
			st, err := b.q.Status(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			snap := map[string]string{}
			for _, j := range st.Jobs {
				snap[j.ChatID] = j.State
			}
			mu.Lock()
			snaps = append(snaps, snap)
			mu.Unlock()
		}
		b.run()

		served := b.cdn.served()
		want := append(append(paths("/img/s%d.png", 1, 2), paths("/img/m%d.png", 1, 3)...), paths("/img/b%d.png", 1, 5)...)
		if !reflect.DeepEqual(served, want) {
			t.Errorf("served %v, want small's rows, then mid's, then big's", served)
		}
		for i, snap := range snaps {
			running := 0
			for chat, state := range snap {
				switch state {
				case "running":
					running++
				case "queued", "done":
				default:
					t.Errorf("snapshot %d: %s is %s", i, chat, state)
				}
			}
			if running != 1 {
				t.Errorf("snapshot %d: %v, want exactly one running", i, snap)
			}
		}
		if first := snaps[0]; first["small"] != "running" || first["mid"] != "queued" || first["big"] != "queued" {
			t.Errorf("first snapshot %v, want small running, the others queued", first)
		}
		for _, j := range b.status().Jobs {
			if j.State != "done" {
				t.Errorf("%s = %s after the run, want done", j.ChatID, j.State)
			}
		}
		b.checkCounters()
	})
}

// Starting one chat starts only that chat's job; a chat with nothing pending (or unknown) is
// not started.
func TestBackfillStartsOneChat(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(10, 0)
		b.scrape("one", "puppet", models.ScrapeDone, "/img/1.png")
		b.scrape("two", "puppet", models.ScrapeDone, "/img/2.png")
		b.start("nobody")
		b.start("two")
		st := b.status()
		if b.mustJob(st, "one").State != "idle" || b.mustJob(st, "two").State != "running" {
			t.Fatalf("states %s/%s, want idle/running", b.mustJob(st, "one").State, b.mustJob(st, "two").State)
		}
		if j := b.mustJob(st, "one"); j.EtaStart != nil || j.EtaTotal != nil || i64(j.EtaRun) != "500" {
			t.Errorf("an idle job's ETAs = %s %s %s, want null, 500, null", i64(j.EtaStart), i64(j.EtaRun), i64(j.EtaTotal))
		}
		b.run()
		st = b.status()
		if b.mustJob(st, "one").State != "idle" || b.mustJob(st, "two").State != "done" {
			t.Errorf("after the run %s/%s, want idle/done", b.mustJob(st, "one").State, b.mustJob(st, "two").State)
		}
		if b.cdn.hitsOf("/img/1.png") != 0 {
			t.Error("chat one's row was fetched")
		}
		if recs := b.logs.named("backfill finished"); len(recs) != 1 || recs[0].attrs["chatId"] != "two" || recs[0].attrs["processed"] != int64(1) {
			t.Errorf("logged %+v, want two finished once, at 1 processed", recs)
		}
	})
}

// A pause takes effect after the current batch (the status says paused at once); starting
// the job again begins a new run.
func TestBackfillPausesAfterTheCurrentBatch(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(2, 1000)
		id := b.scrape("chat-p", "puppet", models.ScrapeDone, paths("/img/%d.png", 1, 6)...)
		b.start("")
		var once sync.Once
		b.cdn.onHit = func(string) {
			once.Do(func() {
				if err := b.q.PauseJobs(context.Background(), "chat-p"); err != nil {
					t.Error(err)
				}
				if j := b.mustJob(b.status(), "chat-p"); j.State != "paused" {
					t.Errorf("state right after the pause = %s, want paused", j.State)
				}
			})
		}
		b.run()
		states := b.rowStates(id)
		cached := 0
		for _, s := range states {
			if s == "cached" {
				cached++
			}
		}
		if cached != 2 || len(b.cdn.served()) != 2 {
			t.Errorf("%d cached, %d fetched; want the batch of 2 finished and nothing more", cached, len(b.cdn.served()))
		}
		j := b.mustJob(b.status(), "chat-p")
		if j.State != "paused" || j.Processed != 2 || j.Pending != 4 {
			t.Errorf("job = %s, processed %d, pending %d; want paused, 2, 4", j.State, j.Processed, j.Pending)
		}
		if j.EtaStart != nil || j.EtaTotal != nil || j.Position != nil {
			t.Errorf("a paused job is out of the schedule: start %s, total %s, position %v; want null", i64(j.EtaStart), i64(j.EtaTotal), j.Position)
		}
		if recs := b.logs.named("backfill paused"); len(recs) != 1 || recs[0].attrs["chatId"] != "chat-p" || recs[0].attrs["processed"] != int64(2) {
			t.Errorf("logged %+v, want chat-p paused once, at 2 processed", recs)
		}

		b.cdn.onHit = nil
		b.clk.Advance(time.Minute)
		b.start("chat-p")
		j = b.mustJob(b.status(), "chat-p")
		// A new run that has not run yet: not started.
		if j.State != "running" || j.Processed != 0 || j.StartedAt != nil || j.RateMeasured {
			t.Errorf("restarted job = %+v, want a new run, not started yet", j)
		}
		resumed := b.clk.Now()
		b.run()
		j = b.mustJob(b.status(), "chat-p")
		if j.State != "done" || j.Processed != 4 || j.Cached != 6 || isoOf(j.StartedAt) != iso(resumed) {
			t.Errorf("job = %s, processed %d, cached %d, started %s; want done, 4, 6, started %s", j.State, j.Processed, j.Cached, isoOf(j.StartedAt), iso(resumed))
		}
	})
}

// Three batches in a row without progress pause the job; suspect failures of two thirds of
// a batch double the cooldown (60 s at least) meanwhile.
func TestBackfillStallPausesAfterThreeBatches(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(3, 1000)
		b.scrape("chat-s", "puppet", models.ScrapeDone, paths("/status/404/%d", 1, 12)...)
		b.start("")
		t0 := b.clk.Now()
		b.run()

		j := b.mustJob(b.status(), "chat-s")
		if j.State != "paused" || j.Pending != 3 {
			t.Fatalf("job = %s with %d pending, want paused with 3", j.State, j.Pending)
		}
		batches := b.logs.named("backfill batch")
		if len(batches) != 3 {
			t.Fatalf("%d batches, want 3", len(batches))
		}
		for i, want := range []struct{ stalled, cooldown int64 }{{1, 60000}, {2, 120000}, {3, 120000}} {
			a := batches[i].attrs
			if a["stalled"] != want.stalled || a["cooldownMs"] != want.cooldown {
				t.Errorf("batch %d: stalled %v, cooldown %v; want %d, %d", i+1, a["stalled"], a["cooldownMs"], want.stalled, want.cooldown)
			}
		}
		if len(b.logs.named("backfill made no progress; job paused")) != 1 {
			t.Error("no log line says the job was paused for making no progress")
		}
		// The two cooldowns (60 s, 120 s) were waited out before the third batch.
		if waited := b.clk.Now().Sub(t0); waited < 180*time.Second {
			t.Errorf("waited %v in all, want at least the 180 s of cooldowns", waited)
		}
		// After each of the first two batches a suspect retry took max(2, ceil(3/2)) = 2 rows
		// (the third batch paused the job first): rows 1-4 were fetched twice, 5-9 once.
		retries := b.logs.named("backfill suspect retry")
		if len(retries) != 2 {
			t.Errorf("%d suspect retries ran, want 2", len(retries))
		}
		for _, r := range retries {
			if r.attrs["rows"] != int64(2) {
				t.Errorf("suspect retry of %v rows, want 2", r.attrs["rows"])
			}
		}
		for i := 1; i <= 9; i++ {
			want := 1
			if i <= 4 {
				want = 2
			}
			if got := b.cdn.hitsOf(fmt.Sprintf("/status/404/%d", i)); got != want {
				t.Errorf("/status/404/%d fetched %d times, want %d", i, got, want)
			}
		}
		b.checkCounters()
	})
}

// The raised cooldown doubles up to five minutes and stays raised for the rest of the job.
func TestBackfillSuspectCooldownDoublesUpToFiveMinutes(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(3, 0)
		var ps []string
		for i := range 6 {
			ps = append(ps, fmt.Sprintf("/status/404/%da", i), fmt.Sprintf("/status/503/%db", i), fmt.Sprintf("/img/%d.png", i))
		}
		ps = append(ps, "/img/x1.png", "/img/x2.png", "/img/x3.png")
		b.scrape("chat-c", "puppet", models.ScrapeDone, ps...)
		b.start("")
		b.run()

		var got []any
		for _, r := range b.logs.named("backfill batch") {
			got = append(got, r.attrs["cooldownMs"])
		}
		want := []any{int64(60000), int64(120000), int64(240000), int64(300000), int64(300000), int64(300000), int64(300000)}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("cooldowns %v, want %v", got, want)
		}
		if n := len(b.logs.named("backfill suspect failures raised the cooldown")); n != 6 {
			t.Errorf("%d raises logged, want 6", n)
		}
		if j := b.mustJob(b.status(), "chat-c"); j.State != "done" || j.Cached != 9 || j.Members[0].Unverified != 12 {
			t.Errorf("job = %s, cached %d, unverified %d; want done, 9, 12", j.State, j.Cached, j.Members[0].Unverified)
		}
	})
}

// One suspect retry takes max(2, ceil(batch/2)) rows; suspects still owed a retry when
// nothing is pending get it before the job is done.
func TestBackfillSuspectRetrySize(t *testing.T) {
	t.Parallel()
	for batch, want := range map[int]int{1: 2, 2: 2, 3: 2, 4: 2, 5: 3, 10: 5, 11: 6, 500: 250} {
		if got := scheduler.SuspectRetrySize(batch); got != want {
			t.Errorf("SuspectRetrySize(%d) = %d, want %d", batch, got, want)
		}
	}
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(5, 0)
		b.scrape("chat-r", "puppet", models.ScrapeDone, paths("/status/404/%d", 1, 5)...)
		b.start("")
		b.run()
		var rows []any
		for _, r := range b.logs.named("backfill suspect retry") {
			rows = append(rows, r.attrs["rows"])
		}
		if !reflect.DeepEqual(rows, []any{int64(3), int64(2)}) {
			t.Errorf("suspect retries of %v rows, want [3 2]", rows)
		}
		if j := b.mustJob(b.status(), "chat-r"); j.State != "done" || j.Members[0].Unverified != 5 || j.Members[0].Suspect != 0 {
			t.Errorf("job = %s, member %+v; want done with 5 unverified", j.State, j.Members[0])
		}
	})
}

// While an active scrape has pushed within the idle time, its walk holds the media-traffic
// lock and the backfill waits; active scrapes are never members.
func TestBackfillWaitsForTheWalk(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(10, 0)
		b.scrape("chat-x", "puppet", models.ScrapeDone, "/img/1.png", "/img/2.png")
		walkStart := b.clk.Now()
		walk := b.scrape("chat-y", "puppet", models.ScrapeActive, "/img/y1.png")
		b.start("")
		b.start("chat-y")

		st := b.status()
		if b.job(st, "chat-y") != nil {
			t.Error("an active scrape's chat is in the backfill")
		}
		if st.Totals.Pending != 2 {
			t.Errorf("totals pending = %d, want 2: active scrapes stay out", st.Totals.Pending)
		}
		if got := isoOf(st.WalkingUntil); got != iso(walkStart.Add(10*time.Minute)) {
			t.Errorf("walkingUntil = %s, want %s", got, iso(walkStart.Add(10*time.Minute)))
		}
		if got := strOf(st.WalkingChat); got != "chat-y" {
			t.Errorf("walkingChat = %s, want the walking chat-y", got)
		}
		if sum, err := b.q.Summary(b.ctx); err != nil || strOf(sum.WalkingChat) != "chat-y" || isoOf(sum.WalkingUntil) != isoOf(st.WalkingUntil) {
			t.Errorf("summary = %+v %v, want the walk named", sum, err)
		}

		var pushedAt time.Time
		var waiting *scheduler.BackfillJobStatus
		b.setOnSleep(func(time.Duration) {
			if waiting == nil {
				waiting = ptrTo(b.mustJob(b.status(), "chat-x"))
			}
			if pushedAt.IsZero() && b.clk.Now().Sub(walkStart) >= 4*time.Minute {
				pushedAt = b.clk.Now()
				if _, err := b.store.AddMedia(context.Background(), walk, []models.NewMedia{{Kind: "image", URL: b.cdn.url("/img/y2.png")}}); err != nil {
					t.Error(err)
				}
			}
		})
		var firstHit time.Time
		b.cdn.onHit = func(string) {
			if firstHit.IsZero() {
				firstHit = b.clk.Now()
			}
		}
		b.run()
		if pushedAt.IsZero() {
			t.Fatal("the queue did not wait for the walk")
		}
		// While the walk holds its first batch the job is queued at the head, starting when
		// the lock lapses, not running.
		if j := waiting; j.State != "queued" || intOf(j.Position) != "0" || strOf(j.WaitsFor) != scheduler.WaitWalk ||
			i64(j.Wait) == "0" || i64(j.EtaStart) != i64(j.Wait) {
			t.Errorf("chat-x waiting for the walk: %s at %s, waits for %s (%s ms), starts in %s; want queued at 0 for the walk, starting when it lapses",
				j.State, intOf(j.Position), strOf(j.WaitsFor), i64(j.Wait), i64(j.EtaStart))
		}
		if want := pushedAt.Add(10 * time.Minute); !firstHit.Equal(want) {
			t.Errorf("the backfill fetched first at %v, want when the walk lock lapsed, %v", firstHit, want)
		}
		if b.cdn.hitsOf("/img/y1.png")+b.cdn.hitsOf("/img/y2.png") != 0 {
			t.Error("the active scrape's rows were fetched")
		}
		if j := b.mustJob(b.status(), "chat-x"); j.State != "done" {
			t.Errorf("chat-x = %s, want done", j.State)
		}
		// One wait for the walk, however many looks it took (the push moved its end once).
		if n := len(b.logs.named("backfill waiting for a walk")); n != 1 {
			t.Errorf("logged %d waits for the walk, want 1", n)
		}
	})
}

// A pause works while the queue waits for a walk.
func TestBackfillPauseWorksDuringTheWalk(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.scrape("chat-x", "puppet", models.ScrapeDone, "/img/1.png")
		b.scrape("chat-y", "puppet", models.ScrapeActive)
		b.start("")
		var once sync.Once
		b.setOnSleep(func(time.Duration) {
			once.Do(func() {
				if err := b.q.PauseJobs(context.Background(), ""); err != nil {
					t.Error(err)
				}
			})
		})
		done := make(chan struct{})
		go func() { b.run(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the queue kept waiting for the walk after a pause")
		}
		if len(b.cdn.served()) != 0 {
			t.Error("rows were fetched while the walk held the lock")
		}
		if j := b.mustJob(b.status(), "chat-x"); j.State != "paused" || j.Pending != 1 {
			t.Errorf("job = %s with %d pending, want paused with 1", j.State, j.Pending)
		}
		if b.clk.Now().Sub(owedtest.Start) >= 10*time.Minute {
			t.Error("the pause waited for the walk to end")
		}
	})
}

// The measured rate is reported only once the run has lasted 30 s; before, the estimate from
// the gaps and settings.
func TestBackfillMeasuresTheRateAfter30s(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db) // 500 ms between requests
		b.settings(10, 0)
		b.scrape("chat-m", "puppet", models.ScrapeDone, paths("/img/%d.png", 1, 100)...)
		b.start("")
		snaps := map[string]scheduler.BackfillJobStatus{}
		b.cdn.onHit = func(p string) {
			if p == "/img/25.png" || p == "/img/75.png" {
				st, err := b.q.Status(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				snaps[p] = b.mustJob(st, "chat-m")
			}
		}
		b.run()
		// Row k is fetched (k-1) × 500 ms after the start, so batch n ends 5n - 0.5 s in.
		for i, r := range b.logs.named("backfill batch") {
			n := float64(i + 1)
			got, measured := r.attrs["perMinute"]
			if n < 7 {
				if measured {
					t.Errorf("batch %v (%.1f s in) reported a measured rate %v", n, 5*n-0.5, got)
				}
				continue
			}
			want := math.Floor(10*n*60000/((5*n-0.5)*1000)*10+0.5) / 10
			if got != want {
				t.Errorf("batch %v: perMinute %v, want %v", n, got, want)
			}
		}
		if early := snaps["/img/25.png"]; early.RateMeasured || early.PerMinute != 120 {
			t.Errorf("early in the run: perMinute %v (measured %v), want the estimate 120", early.PerMinute, early.RateMeasured)
		}
		if late := snaps["/img/75.png"]; !late.RateMeasured || late.PerMinute != 121.7 {
			t.Errorf("late in the run: perMinute %v (measured %v), want 121.7 measured (after batch 7)", late.PerMinute, late.RateMeasured)
		}
		if j := b.mustJob(b.status(), "chat-m"); j.State != "done" || !j.RateMeasured || j.PerMinute != 121.2 {
			t.Errorf("done job: perMinute %v (measured %v), want 121.2 measured", j.PerMinute, j.RateMeasured)
		}
	})
}

// The status arithmetic on fixed figures: the measured or estimated rate of each job, etaMs,
// the waits along the execution order, totals (by backend too), hidden chats, queued jobs,
// the rate limit and the walk.
func TestBackfillStatusArithmetic(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db, withGaps(250*time.Millisecond, 750*time.Millisecond))
		b.settings(10, 1000) // 500 ms + 1000/10 ms a row: 100 a minute
		now := b.clk.Now()
		ms := now.UnixMilli()
		alpha := b.scrape("alpha", "puppet", models.ScrapeDone, paths("/img/a%d.png", 1, 300)...)
		b.scrape("bravo", "slopbot", models.ScrapePaused, paths("/img/b%d.png", 1, 50)...)
		b.scrape("charlie", "puppet", models.ScrapeFailed, paths("/img/c%d.png", 1, 200)...)
		b.scrape("delta", "mirror", models.ScrapeDone, paths("/img/d%d.png", 1, 100)...)
		echo := b.scrape("echo", "puppet", models.ScrapeDone, paths("/img/e%d.png", 1, 5)...)
		fox := b.scrape("foxtrot", "puppet", models.ScrapeDone, paths("/img/f%d.png", 1, 3)...)
		golf := b.scrape("golf", "slopbot", models.ScrapeDone, "/img/g1.png", "/img/g2.png", "/video/g3", "/audio/g4")
		b.scrape("hotel", "puppet", models.ScrapeActive, paths("/img/h%d.png", 1, 7)...)
		downloaded := int64(42)
		if _, err := b.store.UpdateScrape(b.ctx, alpha, nil, &downloaded); err != nil {
			t.Fatal(err)
		}
		b.exec(`UPDATE media SET state = 'cached', stored_bytes = 10 WHERE scrape_id IN (?, ?)`, echo, fox)
		b.exec(`UPDATE media SET state = 'cached', stored_bytes = 100 WHERE scrape_id = ? AND kind = 'image'`, golf)
		b.exec(`UPDATE media SET state = 'skipped' WHERE scrape_id = ? AND kind <> 'image'`, golf)
		ins := `INSERT INTO backfill_jobs (chat_id, guild_id, state, position, processed, per_minute, started_at, finished_at,
			cooldown_ms, stalled, active_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, 0, ?)`
		b.exec(ins, "alpha", "guild-alpha", "running", 1, 90, 150.04, ms-60000, nil, ms)
		b.exec(ins, "bravo", "guild-bravo", "running", 2, 0, nil, ms-60000, nil, ms)
		b.exec(ins, "delta", "guild-delta", "paused", 3, 20, 80, ms-120000, nil, ms-5000)
		b.exec(ins, "foxtrot", "guild-foxtrot", "done", 4, 3, nil, ms-90000, ms-1000, ms-1000)
		b.exec(ins, "golf", "guild-golf", "done", 5, 4, nil, ms-60000, ms, ms)
		b.exec(`UPDATE backfill_runner SET owner = 'elsewhere', lease_until = ?, chat_id = 'alpha', limited_until = ?`, ms+60000, ms+30000)

		st := b.status()
		type figs struct {
			state                           string
			pending                         int64
			perMinute                       float64
			measured                        bool
			eta, etaStart, etaRun, etaTotal string
			position, waitMs, waitsFor      string
		}
		// The walk (hotel, pushed now) holds the queue 10 min, longer than the 30 s rate limit:
		// its 600,000 ms are added to every ETA it holds up. Jobs without a measured rate take
		// the running job's (150.04 a minute); the paused delta is out of the schedule.
		want := map[string]figs{
			"alpha":   {"running", 300, 150, true, "719968", "0", "119968", "719968", "0", "600000", "walk"},
			"bravo":   {"queued", 50, 150, false, "19995", "719968", "19995", "739963", "1", "600000", "queue"},
			"delta":   {"paused", 100, 80, true, "75000", "null", "75000", "null", "null", "null", "null"},
			"golf":    {"done", 0, 150, false, "null", "null", "0", "null", "null", "null", "null"},
			"charlie": {"idle", 200, 150, false, "79979", "null", "79979", "null", "null", "null", "null"},
		}
		var listed []string
		for _, j := range st.Jobs {
			listed = append(listed, j.ChatID)
			w, ok := want[j.ChatID]
			if !ok {
				t.Errorf("%s is listed; fully backfilled chats whose job did not work since start are hidden", j.ChatID)
				continue
			}
			got := figs{j.State, j.Pending, j.PerMinute, j.RateMeasured, i64(j.Eta), i64(j.EtaStart), i64(j.EtaRun), i64(j.EtaTotal),
				intOf(j.Position), i64(j.Wait), strOf(j.WaitsFor)}
			if got != w {
				t.Errorf("%s:\n got  %+v\n want %+v", j.ChatID, got, w)
			}
		}
		if !reflect.DeepEqual(listed, []string{"alpha", "charlie", "delta", "bravo", "golf"}) {
			t.Errorf("listed %v, want by pending, most first", listed)
		}
		a := b.mustJob(st, "alpha")
		// alpha's row says 90 processed while its members hold no settled row (as when a member
		// left the job): processed is shown as what the job holds.
		if a.Processed != 0 || isoOf(a.StartedAt) != iso(now.Add(-time.Minute)) || a.FinishedAt != nil ||
			strOf(a.GuildID) != "guild-alpha" || a.Downloaded != 42 || len(a.Members) != 1 || a.Members[0].PendingByKind.Image != 300 {
			t.Errorf("alpha = %+v", a)
		}
		g := b.mustJob(st, "golf")
		if g.Cached != 2 || g.Skipped != 2 || g.Total != 4 || g.Bytes != 200 || isoOf(g.FinishedAt) != iso(now) || g.Processed != 4 {
			t.Errorf("golf = %+v", g)
		}

		tot := st.Totals
		if tot.Pending != 650 || tot.Cached != 10 || tot.Skipped != 2 || tot.Total != 662 || tot.Bytes != 280 || tot.Downloaded != 42 {
			t.Errorf("totals = %+v", tot)
		}
		// Totals: every pending row at the first running job's rate, after the walk; the
		// total is when the last scheduled job (bravo) ends.
		if tot.PerMinute != 150 || i64(tot.Eta) != "859931" || i64(tot.EtaStart) != "0" || i64(tot.EtaRun) != "259931" || i64(tot.EtaTotal) != "739963" {
			t.Errorf("totals rate %v, ETAs %s %s %s %s; want 150, 859931 0 259931 739963",
				tot.PerMinute, i64(tot.Eta), i64(tot.EtaStart), i64(tot.EtaRun), i64(tot.EtaTotal))
		}
		// The gauges: the rate is the running job's measured one (not the paused delta's 80),
		// the pending rows every chat's, and the rate limit on.
		for name, want := range map[string]float64{"rows_per_minute": 150, "pending": 650, "rate_limited": 1} {
			var m dto.Metric
			if err := b.metrics.Backfill.WithLabelValues(name).Write(&m); err != nil || m.GetGauge().GetValue() != want {
				t.Errorf("gauge %s = %v (%v), want %v", name, m.GetGauge().GetValue(), err, want)
			}
		}
		wantBackends := map[string]scheduler.BackendTotals{
			"puppet":  {Pending: 500, Cached: 8, Total: 508},
			"slopbot": {Pending: 50, Cached: 2, Skipped: 2, Total: 54},
			"mirror":  {Pending: 100, Total: 100},
		}
		if len(tot.ByBackend) != len(wantBackends) {
			t.Errorf("byBackend has %d backends, want %d", len(tot.ByBackend), len(wantBackends))
		}
		for name, w := range wantBackends {
			if got := tot.ByBackend[name]; got == nil || *got != w {
				t.Errorf("byBackend[%s] = %+v, want %+v", name, got, w)
			}
		}
		if st.EstimatedPerMinute != 100 || isoOf(st.LimitedUntil) != iso(now.Add(30*time.Second)) ||
			isoOf(st.WalkingUntil) != iso(now.Add(10*time.Minute)) || strOf(st.WalkingChat) != "hotel" || st.Settings.BatchSize != 10 || st.Settings.BatchPauseMs != 1000 {
			t.Errorf("estimate %v, limitedUntil %s, walkingUntil %s, settings %+v", st.EstimatedPerMinute, isoOf(st.LimitedUntil),
				isoOf(st.WalkingUntil), st.Settings)
		}

		sum, err := b.q.Summary(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Pending != 650 || sum.PerMinute != 150 || i64(sum.Eta) != "859931" || strOf(sum.Running) != "alpha" || isoOf(sum.LimitedUntil) != iso(now.Add(30*time.Second)) {
			t.Errorf("summary = %+v", sum)
		}

		// Once the lease holder is gone, nothing is claimed: the first started job in the run
		// order shows running (whoever takes the lease runs it next), the rest queued, and the
		// dead runner's rate limit no longer holds the queue.
		b.clk.Advance(2 * time.Minute)
		st = b.status()
		if b.mustJob(st, "alpha").State != "running" || b.mustJob(st, "bravo").State != "queued" || st.LimitedUntil != nil {
			t.Errorf("without a live lease: alpha %s, bravo %s, limitedUntil %s", b.mustJob(st, "alpha").State,
				b.mustJob(st, "bravo").State, isoOf(st.LimitedUntil))
		}
	})
}

// A restart resumes the job that was running: the new process waits for the dead one's
// lease to run out, then carries on where the rows stand.
func TestBackfillResumesAfterACrash(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(2, 0)
		id := b.scrape("chat-c", "puppet", models.ScrapeDone, paths("/img/%d.png", 1, 6)...)
		b.start("")
		ctx, crash := context.WithCancel(context.Background())
		b.cdn.hang = func(p string) bool {
			if p == "/img/3.png" {
				crash()
				return true
			}
			return false
		}
		if err := b.q.RunQueue(ctx); err != nil {
			t.Fatal(err)
		}
		// The process died holding the lease, mid-job.
		b.exec(`UPDATE backfill_runner SET owner = 'dead', lease_until = ?, chat_id = 'chat-c'`, b.clk.Now().Add(2*time.Minute).UnixMilli())
		if got := b.rowStates(id); got["/img/1.png"] != "cached" || got["/img/2.png"] != "cached" || got["/img/3.png"] != "pending" {
			t.Fatalf("rows after the crash = %v", got)
		}
		b.store.Close()

		b.store = owedtest.Store(t, db, b.clk)
		b.cdn.hang = nil
		b.build(bfOptions{minGap: 500 * time.Millisecond, maxGap: 500 * time.Millisecond, timeout: 5 * time.Second,
			owner: "proc-b", walkIdle: 10 * time.Minute})
		if j := b.mustJob(b.status(), "chat-c"); j.State != "running" || j.Processed != 2 {
			t.Fatalf("after the restart the job = %s, processed %d; want running, 2", j.State, j.Processed)
		}
		served := len(b.cdn.served())
		b.run()
		if len(b.cdn.served()) != served {
			t.Fatal("the new process ran the queue while the dead one's lease held")
		}
		b.clk.Advance(2 * time.Minute)
		b.run()
		j := b.mustJob(b.status(), "chat-c")
		if j.State != "done" || j.Cached != 6 || j.Processed != 6 {
			t.Errorf("resumed job = %s, cached %d, processed %d; want done, 6, 6", j.State, j.Cached, j.Processed)
		}
		// Running time survives the restart and leaves out the 2 min the job sat dead: batch 1
		// (0 to 0.5 s) before the crash, then rows 3-6 from 0 to 1.5 s of the new run.
		if row, err := b.store.BackfillJobOf(b.ctx, "chat-c"); err != nil || row.RunMs != 2000 || row.RunRows != 6 {
			t.Errorf("resumed job's run = %d ms, %d rows (%v); want 2000 ms, 6 rows", row.RunMs, row.RunRows, err)
		}
		b.checkCounters()
	})
}

// With several processes, only the lease holder runs the queue; it renews the lease while it
// waits, and gives it up when the queue is empty.
func TestBackfillOnlyTheLeaseHolderRuns(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		other := scheduler.NewBackfill(b.store, b.engine, b.stepping(), slog.New(b.logs), nil,
			scheduler.BackfillConfig{Owner: "proc-b", Lease: 2 * time.Minute})
		// Late in the 10 min wait, past the lease's 2 min: renewals kept it.
		b.lateInAWalk(4, func() {
			b.wantLiveLease("proc-a")
			if err := other.RunQueue(context.Background()); err != nil {
				t.Error(err)
			}
			// The walk holds the job's first batch: it is at the head of the queue.
			if st, _ := other.Status(context.Background()); intOf(b.mustJob(st, "chat-l").Position) != "0" {
				t.Error("another process does not see the job at the head of the queue")
			}
		})
		for _, p := range paths("/img/%d.png", 1, 4) {
			if n := b.cdn.hitsOf(p); n != 1 {
				t.Errorf("%s fetched %d times, want once", p, n)
			}
		}
		r, err := b.store.BackfillRunnerState(b.ctx)
		if err != nil || r.Owner != nil {
			t.Errorf("runner after the run = %+v (%v), want the lease given up", r, err)
		}
		if recs := b.logs.named("backfill release lease"); len(recs) != 0 {
			t.Errorf("a release that worked logged %+v", recs)
		}
	})
}

// On boot, auto starts every job with pending rows (except the ones an admin paused) and the
// loop runs them; Stop ends the loop.
func TestBackfillAutoStartsOnBoot(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.scrape("one", "puppet", models.ScrapeDone, "/img/1.png", "/img/2.png")
		b.scrape("two", "slopbot", models.ScrapeDone, "/img/3.png")
		b.scrape("three", "puppet", models.ScrapeDone, "/img/4.png")
		b.start("three")
		if err := b.q.PauseJobs(b.ctx, "three"); err != nil {
			t.Fatal(err)
		}
		if err := b.q.AutoStart(b.ctx); err != nil {
			t.Fatal(err)
		}
		if j := b.mustJob(b.status(), "one"); j.State != "idle" {
			t.Fatalf("auto off: one = %s, want idle", j.State)
		}
		if err := b.q.SetSettings(b.ctx, scheduler.BackfillSettings{BatchSize: 10, BatchPauseMs: 0, Auto: true}); err != nil {
			t.Fatal(err)
		}
		if err := b.q.Start(b.ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			st := b.status()
			if b.mustJob(st, "one").State == "done" && b.mustJob(st, "two").State == "done" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("jobs not done after auto-start: %+v", st.Jobs)
			}
			time.Sleep(10 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := b.q.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if j := b.mustJob(b.status(), "three"); j.State != "paused" || j.Pending != 1 {
			t.Errorf("three = %s with %d pending, want still paused", j.State, j.Pending)
		}
		if recs := b.logs.named("backfill auto-start"); len(recs) != 0 {
			t.Errorf("an auto-start that worked logged %+v", recs)
		}
	})
}

// A delete goes pending-delete → deleting → deleted, removing the previews and rows; the
// scrape leaves the backfill at once and the lists once deleted.
func TestScrapeDeleteRemovesPreviewsAndRows(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(10, 0)
		keep := b.scrape("chat-d", "puppet", models.ScrapeDone, "/img/k.png")
		gone := b.scrape("chat-d", "puppet", models.ScrapeDone, "/img/1.png", "/gif/2.gif", "/video/3")
		b.start("")
		b.run()
		rows, err := b.store.ListMedia(b.ctx, gone, "", 0, 10)
		if err != nil || len(rows) != 3 {
			t.Fatalf("rows = %v, %v", rows, err)
		}
		kept, _ := b.store.ListMedia(b.ctx, keep, "", 0, 10)

		sc, err := b.store.RequestScrapeDelete(b.ctx, gone)
		if err != nil || sc.State != models.ScrapePendingDelete {
			t.Fatalf("delete = %s, %v; want pending-delete", sc.State, err)
		}
		if j := b.mustJob(b.status(), "chat-d"); len(j.Members) != 1 || j.Members[0].ScrapeID != keep {
			t.Errorf("members after the delete = %+v, want only the kept scrape", j.Members)
		}
		if _, err := b.store.AddMedia(b.ctx, gone, []models.NewMedia{{Kind: "image", URL: "https://x/y.png"}}); !errors.Is(err, models.ErrConflict) {
			t.Errorf("push to a deleting scrape: %v, want ErrConflict", err)
		}
		if _, err := b.store.UpdateScrape(b.ctx, gone, ptrTo(models.ScrapeDone), nil); !errors.Is(err, models.ErrConflict) {
			t.Errorf("state change of a deleting scrape: %v, want ErrConflict", err)
		}
		if ok, err := b.store.RecordPreview(b.ctx, rows[0].ID, models.MediaCached, 1); ok || err != nil {
			t.Errorf("recording a preview of a deleting scrape's row: %v %v, want refused", ok, err)
		}

		if err := b.q.RunDeletes(b.ctx); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if _, err := os.Stat(b.engine.PreviewPath(r.ID)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("preview of row %d still there: %v", r.ID, err)
			}
		}
		if _, err := os.Stat(b.engine.PreviewPath(kept[0].ID)); err != nil {
			t.Errorf("the kept scrape's preview went too: %v", err)
		}
		sc, err = b.store.ScrapeByID(b.ctx, gone)
		if err != nil || sc.State != models.ScrapeDeleted || sc.Counts.Total != 0 {
			t.Errorf("scrape after the delete = %+v, %v", sc, err)
		}
		if left, _ := b.store.ListMedia(b.ctx, gone, "", 0, 10); len(left) != 0 {
			t.Errorf("%d rows left", len(left))
		}
		list, err := b.store.ListScrapes(b.ctx, models.ScrapeFilter{}, 0, 100)
		if err != nil || len(list) != 1 || list[0].ID != keep {
			t.Errorf("list after the delete = %v, %v; want only the kept scrape", list, err)
		}
		if sc, _ := b.store.RequestScrapeDelete(b.ctx, gone); sc.State != models.ScrapeDeleted {
			t.Errorf("deleting again: %s, want still deleted", sc.State)
		}
		b.checkCounters()
	})
}

func ptrTo[T any](v T) *T { return &v }

// A job that finishes owes the backfill.finished webhook, in the same transaction as its
// state; a paused job owes nothing.
func TestBackfillFinishedOwesTheWebhook(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(10, 0)
		if _, err := b.store.CreateWebhook(b.ctx, "https://hooks.example/owed", []string{models.EventBackfillFinished}, webhooks.NewSecret()); err != nil {
			t.Fatal(err)
		}
		b.scrape("chat-w", "puppet", models.ScrapeDone, "/img/1.png", "/video/2", "/garbage/3")
		b.start("")
		b.run()
		var rows []struct {
			Event   string `gorm:"column:event"`
			Payload string `gorm:"column:payload"`
		}
		if err := b.store.RawScan(b.ctx, &rows, `SELECT event, payload FROM webhook_deliveries`); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Event != models.EventBackfillFinished {
			t.Fatalf("deliveries = %+v, want one backfill.finished", rows)
		}
		for _, want := range []string{`"chatId":"chat-w"`, `"guildId":"guild-chat-w"`, `"processed":3`, `"cached":1`, `"failed":1`, `"total":3`} {
			if !strings.Contains(rows[0].Payload, want) {
				t.Errorf("payload %s lacks %s", rows[0].Payload, want)
			}
		}
	})
}

// An admin's release of the walk lock (ReleaseWalk) names the walking chats, records them in
// its transaction, logs and wakes the queue so it goes on now; with no walk it releases,
// records and wakes nothing, and logs nothing.
func TestReleaseWalkWakesTheQueueOnlyWhenItReleased(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.scrape("chat-x", "puppet", models.ScrapeDone, "/img/1.png")
		b.scrape("chat-y", "puppet", models.ScrapeActive, "/img/y1.png")
		if st := b.status(); strOf(st.WalkingChat) != "chat-y" {
			t.Fatalf("walkingChat = %s, want chat-y", strOf(st.WalkingChat))
		}
		woken := b.q.WatchWake()
		var recorded [][]string
		record := func(tx *models.Store, chats []string) error { recorded = append(recorded, chats); return nil }
		chats, err := b.q.ReleaseWalk(b.ctx, record)
		if err != nil || fmt.Sprint(chats) != "[chat-y]" || fmt.Sprint(recorded) != "[[chat-y]]" {
			t.Fatalf("release: %v %v, recorded %v; want chat-y", chats, err, recorded)
		}
		if st := b.status(); st.WalkingChat != nil || st.WalkingUntil != nil {
			t.Errorf("after the release: walking %s until %s, want none", strOf(st.WalkingChat), isoOf(st.WalkingUntil))
		}
		if !woken() {
			t.Error("the release did not wake the queue: it waits out the walk's idle time")
		}
		if logged := b.logs.named("walk lock released by an admin"); len(logged) != 1 || fmt.Sprint(logged[0].attrs["chats"]) != "[chat-y]" {
			t.Errorf("release log lines %v, want one naming chat-y", logged)
		}

		woken = b.q.WatchWake()
		chats, err = b.q.ReleaseWalk(b.ctx, record)
		if err != nil || len(chats) != 0 || len(recorded) != 2 || len(recorded[1]) != 0 {
			t.Errorf("a release with no walk: %v %v, recorded %v; want nothing", chats, err, recorded)
		}
		if woken() {
			t.Error("a release with no walk woke the queue")
		}
		if logged := b.logs.named("walk lock released by an admin"); len(logged) != 1 {
			t.Errorf("%d release log lines after a release with no walk, want still 1", len(logged))
		}
	})
}
