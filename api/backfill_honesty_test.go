package api_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// honestCDN serves PNGs; every limitEvery-th request to /steady/ answers 429 with Retry-After
// retryAfter, and onHit hears each path before it is answered.
type honestCDN struct {
	*httptest.Server
	mu         sync.Mutex
	limitEvery int
	retryAfter string
	steady     int
	limited    int
	onHit      func(path string)
}

func newHonestCDN(t *testing.T) *honestCDN {
	var buf bytes.Buffer
	png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 8, 6)))
	c := &honestCDN{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		hook, limit := c.onHit, false
		if strings.HasPrefix(r.URL.Path, "/steady/") {
			c.steady++
			limit = c.limitEvery > 0 && c.steady%c.limitEvery == 0
			if limit {
				c.limited++
			}
		}
		retryAfter := c.retryAfter
		c.mu.Unlock()
		if hook != nil {
			hook(r.URL.Path)
		}
		if limit {
			w.Header().Set("Retry-After", retryAfter)
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write(buf.Bytes())
	}))
	t.Cleanup(c.Close)
	return c
}

// bfx is an owed whose backfill waits in fake time (rate limits, gaps, cooldowns), with a bot
// and a CDN on loopback.
type bfx struct {
	t   *testing.T
	env *owedtest.Env
	bot string
	cdn *honestCDN
}

func newBFX(t *testing.T, db string) *bfx {
	env := owedtest.NewEnvFakeSleep(t, db, func(c *app.Config) {
		c.MediaMinGap, c.MediaMaxGap = 500*time.Millisecond, 500*time.Millisecond
		c.MediaAllowPrivate = true // the CDN is on loopback
	})
	_, bot := env.User("bo", models.RoleBot)
	return &bfx{t: t, env: env, bot: bot, cdn: newHonestCDN(t)}
}

// ok sends a request and wants 2xx; it answers the JSON body.
func (x *bfx) ok(method, path, token string, body any) map[string]any {
	x.t.Helper()
	r := x.env.Do(method, path, token, body)
	if r.Status/100 != 2 {
		x.t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
	}
	return r.JSON()
}

// chat makes a done scrape of chat with media rows at the CDN paths.
func (x *bfx) chat(chat string, paths ...string) {
	x.t.Helper()
	sc := x.ok(http.MethodPost, "/api/scrapes", x.bot, map[string]any{"chatId": chat, "guildId": "g", "backend": "puppet", "mode": "history"})
	id := int64(sc["id"].(float64))
	rows := make([]map[string]any, len(paths))
	for i, p := range paths {
		rows[i] = map[string]any{"url": x.cdn.URL + p, "kind": "image"}
	}
	x.ok(http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", id), x.bot, map[string]any{"media": rows})
	x.ok(http.MethodPatch, fmt.Sprintf("/api/scrapes/%d", id), x.bot, map[string]any{"state": "done"})
}

func (x *bfx) settings(size, pauseMs int) {
	x.t.Helper()
	x.ok(http.MethodPut, "/api/backfill/settings", x.env.AdminToken, map[string]any{"batchSize": size, "batchPauseMs": pauseMs, "auto": false})
}

// run runs the queue until no job is running, as the queue's periodic pass does.
func (x *bfx) run() {
	x.t.Helper()
	if err := x.env.App.Backfill.RunQueue(context.Background()); err != nil {
		x.t.Fatalf("run the queue: %v", err)
	}
}

// jobOf finds chat's job in a status answer.
func jobOf(t *testing.T, st map[string]any, chat string) map[string]any {
	t.Helper()
	for _, j := range st["jobs"].([]any) {
		if j := j.(map[string]any); j["chatId"] == chat {
			return j
		}
	}
	t.Fatalf("chat %s is not in the status %v", chat, st)
	return nil
}

func (x *bfx) job(chat string) map[string]any {
	x.t.Helper()
	return jobOf(x.t, x.ok(http.MethodGet, "/api/backfill", x.env.AdminToken, nil), chat)
}

func imgs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d.png", prefix, i+1)
	}
	return out
}

// A job paused during its last batch answers paused while work is left, and done once the
// batch ends; a paused job an older owed left with nothing pending is done after a start, a
// pause or the queue's pass.
func TestBackfillAPIPausedWithNothingLeftIsDone(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		x := newBFX(t, db)
		x.settings(2, 1000)
		x.chat("last", imgs("/img/l", 4)...)
		x.ok(http.MethodPost, "/api/backfill/start", x.env.AdminToken, map[string]any{"chatId": "last"})
		var answered map[string]any
		x.cdn.onHit = func(p string) {
			if p == "/img/l4.png" {
				answered = jobOf(t, x.ok(http.MethodPost, "/api/backfill/pause", x.env.AdminToken, map[string]any{"chatId": "last"}), "last")
			}
		}
		x.run()
		if answered == nil || answered["state"] != "paused" || answered["pending"] != 1.0 {
			t.Fatalf("the pause during the last row answered %v, want paused with 1 pending", answered)
		}
		if j := x.job("last"); j["state"] != "done" || j["finishedAt"] == nil || j["pending"] != 0.0 || j["processed"] != 4.0 || j["position"] != nil {
			t.Errorf("after the last batch: %v, want done, finished, 4 processed", j)
		}

		// Rows as an older owed left them: paused, nothing pending.
		ms := x.env.Clock.Now().UnixMilli()
		for i, chat := range []string{"by-start", "by-pause", "by-pass"} {
			x.chat(chat, imgs("/img/"+chat, 2)...)
			for _, q := range []string{
				`UPDATE media SET state = 'cached', stored_bytes = 10 WHERE scrape_id IN (SELECT id FROM scrapes WHERE chat_id = ?)`,
				`INSERT INTO backfill_jobs (chat_id, guild_id, state, position, processed, per_minute, started_at, finished_at,
					cooldown_ms, stalled, active_at) VALUES (?, 'g', 'paused', 10, 2, NULL, 0, NULL, NULL, 0, 0)`,
			} {
				if _, err := x.env.App.Store.RawExec(context.Background(), q, chat); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := x.env.App.Store.RawExec(context.Background(), `UPDATE backfill_jobs SET position = ?, started_at = ?, active_at = ? WHERE chat_id = ?`,
				10+i, ms-60000, ms, chat); err != nil {
				t.Fatal(err)
			}
			if j := x.job(chat); j["state"] != "paused" || j["pending"] != 0.0 {
				t.Fatalf("%s = %v, want the stuck row: paused, 0 pending", chat, j)
			}
		}
		if j := jobOf(t, x.ok(http.MethodPost, "/api/backfill/start", x.env.AdminToken, map[string]any{"chatId": "by-start"}), "by-start"); j["state"] != "done" {
			t.Errorf("start answered %v for the stuck job, want done", j["state"])
		}
		if j := jobOf(t, x.ok(http.MethodPost, "/api/backfill/pause", x.env.AdminToken, map[string]any{"chatId": "by-pause"}), "by-pause"); j["state"] != "done" {
			t.Errorf("pause answered %v for the stuck job, want done", j["state"])
		}
		if j := x.job("by-pass"); j["state"] != "paused" {
			t.Fatalf("by-pass = %v before the queue's pass, want still paused (a read changes nothing)", j["state"])
		}
		x.run()
		if j := x.job("by-pass"); j["state"] != "done" || j["finishedAt"] == nil {
			t.Errorf("after the queue's pass by-pass = %v, want done", j)
		}
	})
}

// processed counts each row once: a 200-row chat under steady 429s shows 200, not 200 plus a
// row for every 429.
func TestBackfillAPIProcessedNeverExceedsTheRows(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		x := newBFX(t, db)
		x.settings(20, 500)
		x.cdn.limitEvery, x.cdn.retryAfter = 15, "1"
		x.chat("chat-s", imgs("/steady/", 200)...)
		x.ok(http.MethodPost, "/api/backfill/start", x.env.AdminToken, nil)
		x.run()
		if x.cdn.limited < 10 {
			t.Fatalf("%d 429s; the scenario needs steady ones", x.cdn.limited)
		}
		j := x.job("chat-s")
		if j["state"] != "done" || j["total"] != 200.0 || j["cached"] != 200.0 || j["processed"] != 200.0 {
			t.Errorf("job: %v %v total, %v cached, %v processed; want done, 200, 200, 200 (the seed's count: %d)",
				j["state"], j["total"], j["cached"], j["processed"], 200+x.cdn.limited)
		}
	})
}

// startedAt is null while a job has not run (queued, or started but not yet at its first
// batch), and the time its first batch began once it has.
func TestBackfillAPIStartedAtOnlyOnceItRan(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		x := newBFX(t, db)
		x.settings(10, 0)
		x.chat("small", imgs("/img/s", 2)...)
		x.chat("large", imgs("/img/l", 3)...)
		st := x.ok(http.MethodPost, "/api/backfill/start", x.env.AdminToken, nil)
		for chat, state := range map[string]string{"small": "running", "large": "queued"} {
			if j := jobOf(t, st, chat); j["state"] != state || j["startedAt"] != nil {
				t.Errorf("%s after Start all: %v, started %v; want %s, null", chat, j["state"], j["startedAt"], state)
			}
		}
		t0 := x.env.Clock.Now()
		var queued map[string]any
		x.cdn.onHit = func(p string) {
			if p == "/img/s2.png" {
				queued = x.job("large")
			}
		}
		x.run()
		if queued == nil || queued["state"] != "queued" || queued["startedAt"] != nil {
			t.Errorf("large while small ran: %v, want queued and not started", queued)
		}
		// small: rows fetched at 0 and 0.5 s; large's first batch begins as small ends, at 0.5 s
		// (its first request a gap later).
		for chat, at := range map[string]time.Time{"small": t0, "large": t0.Add(500 * time.Millisecond)} {
			if j := x.job(chat); j["state"] != "done" || j["startedAt"] != at.Format("2006-01-02T15:04:05.000Z") {
				t.Errorf("%s: %v, started %v; want done, started %s", chat, j["state"], j["startedAt"], at.Format("2006-01-02T15:04:05.000Z"))
			}
		}
	})
}

// A job whose first batch waits for a walk is queued at the head of the run order and starts
// when the walk lock lapses: never "running" beside a start of now. Once an admin releases the
// lock it runs, starting now.
func TestBackfillAPIJobWaitingForTheWalkIsQueuedAtTheHead(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		x := newBFX(t, db)
		x.settings(10, 0)
		x.chat("archive", imgs("/img/a", 3)...)
		x.ok(http.MethodPost, "/api/scrapes", x.bot, map[string]any{"chatId": "live", "guildId": "g", "backend": "puppet", "mode": "history"})
		x.ok(http.MethodPost, "/api/backfill/start", x.env.AdminToken, nil)

		j := x.job("archive")
		wait, _ := j["waitMs"].(float64)
		if j["state"] != "queued" || j["position"] != 0.0 || j["waitsFor"] != "walk" || j["startedAt"] != nil ||
			wait <= 0 || wait > float64((10*time.Minute).Milliseconds()) || j["etaStartMs"] != wait ||
			j["etaTotalMs"] != wait+j["etaRunMs"].(float64) || j["etaMs"] != j["etaTotalMs"] {
			t.Errorf("archive while the walk holds its first batch: %v %v %v, started %v, wait %v, ETAs start %v run %v total %v eta %v;"+
				" want queued at 0 for the walk, not started, starting after the wait and ending a run later",
				j["state"], j["position"], j["waitsFor"], j["startedAt"], j["waitMs"], j["etaStartMs"], j["etaRunMs"], j["etaTotalMs"], j["etaMs"])
		}

		st := x.ok(http.MethodPost, "/api/admin/backfill/walk/release", x.env.AdminToken, nil)
		if j := jobOf(t, st, "archive"); j["state"] != "running" || j["position"] != 0.0 || j["etaStartMs"] != 0.0 ||
			j["waitsFor"] != nil || j["waitMs"] != 0.0 || j["etaTotalMs"] != j["etaRunMs"] {
			t.Errorf("archive once the walk lock is released: %v at %v, start %v, waits for %v (%v ms), total %v, run %v;"+
				" want running at 0, starting now, waiting for nothing", j["state"], j["position"], j["etaStartMs"], j["waitsFor"], j["waitMs"], j["etaTotalMs"], j["etaRunMs"])
		}
	})
}

// Under steady 429s the measured rate counts the waits (waitedMs): pending over it is how long
// the rest really takes.
func TestBackfillAPIRateCountsSteadyRateLimitWaits(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		x := newBFX(t, db)
		x.settings(10, 0)
		x.cdn.limitEvery, x.cdn.retryAfter = 20, "3" // 20 requests (10 s), then a 3 s wait
		x.chat("chat-q", imgs("/steady/", 300)...)
		x.ok(http.MethodPost, "/api/backfill/start", x.env.AdminToken, nil)
		var at time.Time
		var sample map[string]any
		x.cdn.onHit = func(p string) {
			if p == "/steady/150.png" && sample == nil {
				at, sample = x.env.Clock.Now(), x.job("chat-q")
			}
		}
		x.run()
		if sample == nil || sample["rateMeasured"] != true || sample["etaMs"] == nil || sample["waitedMs"].(float64) <= 0 {
			t.Fatalf("halfway: %v, want a measured rate that counts waits, and an ETA", sample)
		}
		actual := x.env.Clock.Now().Sub(at)
		eta := time.Duration(sample["etaMs"].(float64)) * time.Millisecond
		if e := math.Abs(float64(eta-actual)) / float64(actual); e > 0.10 {
			t.Errorf("ETA halfway %v, actual %v: %.1f %% off, want within 10 %%", eta, actual, 100*e)
		}
		j := x.job("chat-q")
		row, err := x.env.App.Store.BackfillJobOf(context.Background(), "chat-q")
		if err != nil {
			t.Fatal(err)
		}
		want := math.Floor(float64(row.RunRows)*60000/float64(row.RunMs+row.RunWaitMs)*10+0.5) / 10
		if j["waitedMs"] != float64(row.RunWaitMs) || row.RunWaitMs < 3000*models.WaitsCountFrom || j["perMinute"] != want {
			t.Errorf("done: waitedMs %v, perMinute %v; want %d (at least two waits of 3 s), %v", j["waitedMs"], j["perMinute"], row.RunWaitMs, want)
		}
	})
}
