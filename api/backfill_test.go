package api_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
	"github.com/owed/owed/scheduler"
)

func sortedKeys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, " ")
}

// wantKeys checks that m has every key of the seed's shape (owed may add its own).
func wantKeys(t *testing.T, where string, v any, keys string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s = %v, want an object", where, v)
	}
	for _, k := range strings.Fields(keys) {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q (has %s)", where, k, sortedKeys(m))
		}
	}
	return m
}

// GET /api/backfill has the seed's whole status shape, and start, pause and settings answer it.
func TestBackfillStatusShapeAndControls(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		s := newSX(t, db)
		id := s.create("c1")
		s.push(id, "https://cdn.example/1.png", "https://cdn.example/2.png")
		s.setState(id, "paused")
		other := s.create("c2")
		s.push(other, "https://cdn.example/3.png")
		s.setState(other, "done")

		st := s.do(http.MethodGet, "/api/backfill", s.env.AdminToken, nil).JSON()
		wantKeys(t, "status", st, "jobs totals settings limitedUntil estimatedPerMinute")
		wantKeys(t, "settings", st["settings"], "batchSize batchPauseMs auto")
		totals := wantKeys(t, "totals", st["totals"], "pending cached failed total downloaded bytes perMinute etaMs etaStartMs etaRunMs etaTotalMs byBackend")
		wantKeys(t, "byBackend", totals["byBackend"], "puppet slopbot")
		wantKeys(t, "byBackend.puppet", totals["byBackend"].(map[string]any)["puppet"], "pending cached failed total")
		jobs := st["jobs"].([]any)
		if len(jobs) != 2 {
			t.Fatalf("jobs = %v", jobs)
		}
		job := wantKeys(t, "job", jobs[0], "chatId guildId state members pending cached failed total downloaded bytes processed startedAt finishedAt perMinute etaMs etaStartMs etaRunMs etaTotalMs")
		member := wantKeys(t, "member", job["members"].([]any)[0], "scrapeId state backend mode pending cached failed suspect unverified total downloaded bytes pendingByKind")
		wantKeys(t, "pendingByKind", member["pendingByKind"], "image gif video audio")
		if job["chatId"] != "c1" || job["state"] != "idle" || job["pending"] != 2.0 || job["guildId"] != "g-c1" || job["startedAt"] != nil {
			t.Errorf("job = %v", job)
		}
		if st["limitedUntil"] != nil || totals["pending"] != 3.0 || totals["etaStartMs"] != 0.0 {
			t.Errorf("status = %v", st)
		}

		// No body at all starts every job; a JSON body names one chat.
		r := s.do(http.MethodPost, "/api/backfill/start", s.env.AdminToken, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("start all: %d %s", r.Status, r.Body)
		}
		// Start all takes the smallest first (c2, one row): it holds the queue (running,
		// position 0) and c1 queues behind it (position 1).
		for _, j := range r.JSON()["jobs"].([]any) {
			j := j.(map[string]any)
			want := map[string][2]any{"c2": {"running", 0.0}, "c1": {"queued", 1.0}}[j["chatId"].(string)]
			if j["state"] != want[0] || j["position"] != want[1] {
				t.Errorf("after start all: %v, want state %v, position %v", j, want[0], want[1])
			}
		}
		r = s.do(http.MethodPost, "/api/backfill/pause", s.env.AdminToken, map[string]any{"chatId": "c2"})
		states := map[string]any{}
		for _, j := range r.JSON()["jobs"].([]any) {
			states[j.(map[string]any)["chatId"].(string)] = j.(map[string]any)["state"]
		}
		if r.Status != http.StatusOK || states["c1"] != "running" || states["c2"] != "paused" {
			t.Errorf("pause c2: %d %v", r.Status, states)
		}
		if r := s.do(http.MethodPost, "/api/backfill/pause", s.env.AdminToken, map[string]any{}); r.Status != http.StatusOK {
			t.Errorf("pause all: %d %s", r.Status, r.Body)
		}
		r = s.do(http.MethodPost, "/api/backfill/start", s.env.AdminToken, map[string]any{"chatId": "c2"})
		states = map[string]any{}
		for _, j := range r.JSON()["jobs"].([]any) {
			states[j.(map[string]any)["chatId"].(string)] = j.(map[string]any)["state"]
		}
		if states["c1"] != "paused" || states["c2"] != "running" {
			t.Errorf("start c2: %v", states)
		}

		r = s.do(http.MethodPut, "/api/backfill/settings", s.env.AdminToken, map[string]any{"batchSize": 50, "batchPauseMs": 0, "auto": true})
		if got := r.JSON(); r.Status != http.StatusOK || got["settings"].(map[string]any)["batchSize"] != 50.0 || got["jobs"] == nil {
			t.Errorf("settings: %d %s", r.Status, r.Body)
		}
		if got := s.do(http.MethodGet, "/api/backfill/settings", s.env.AdminToken, nil).JSON(); got["batchSize"] != 50.0 || got["auto"] != true {
			t.Errorf("settings read back: %v", got)
		}

		stats := s.do(http.MethodGet, "/api/admin/stats", s.env.AdminToken, nil).JSON()
		wantKeys(t, "stats.backfill", stats["backfill"], "pending perMinute etaMs running limitedUntil")
	})
}

func TestBackfillControlsRefuseBadInput(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		s := newSX(t, db)
		id := s.create("c1")
		s.push(id, "https://cdn.example/1.png")
		s.setState(id, "done")
		before := s.do(http.MethodGet, "/api/backfill/settings", s.env.AdminToken, nil).Body
		for _, c := range []struct {
			name  string
			body  any
			field string
		}{
			{"batchSize 0", map[string]any{"batchSize": 0, "batchPauseMs": 0, "auto": false}, "batchSize"},
			{"batchSize 501", map[string]any{"batchSize": 501, "batchPauseMs": 0, "auto": false}, "batchSize"},
			{"batchSize fractional", map[string]any{"batchSize": 1.5, "batchPauseMs": 0, "auto": false}, "batchSize"},
			{"batchSize missing", map[string]any{"batchPauseMs": 0, "auto": false}, "batchSize"},
			{"batchPauseMs negative", map[string]any{"batchSize": 10, "batchPauseMs": -1, "auto": false}, "batchPauseMs"},
			{"batchPauseMs huge", map[string]any{"batchSize": 10, "batchPauseMs": 3600001, "auto": false}, "batchPauseMs"},
			{"batchPauseMs missing", map[string]any{"batchSize": 10, "auto": false}, "batchPauseMs"},
			{"auto missing", map[string]any{"batchSize": 10, "batchPauseMs": 0}, "auto"},
			{"auto a string", map[string]any{"batchSize": 10, "batchPauseMs": 0, "auto": "yes"}, "auto"},
		} {
			t.Run(c.name, func(t *testing.T) {
				wantError(t, s.do(http.MethodPut, "/api/backfill/settings", s.env.AdminToken, c.body), 400, "invalid", c.field)
			})
		}
		if after := s.do(http.MethodGet, "/api/backfill/settings", s.env.AdminToken, nil).Body; !bytes.Equal(before, after) {
			t.Errorf("refused settings changed them: %s → %s", before, after)
		}
		for _, c := range []struct {
			name    string
			body    any
			headers []string
			status  int
			code    string
			field   string
		}{
			{"a blank chatId", map[string]any{"chatId": ""}, nil, 400, "invalid", "chatId"},
			{"a numeric chatId", map[string]any{"chatId": 7}, nil, 400, "invalid", "chatId"},
			{"an unknown field", map[string]any{"chat": "c1"}, nil, 400, "invalid", "chat"},
			{"an empty JSON body", []byte(""), nil, 400, "invalid", ""},
			{"malformed JSON", []byte(`{"chatId":`), nil, 400, "invalid", ""},
			{"a text body", []byte("c1"), []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type", ""},
		} {
			t.Run("start: "+c.name, func(t *testing.T) {
				wantError(t, s.do(http.MethodPost, "/api/backfill/start", s.env.AdminToken, c.body, c.headers...), c.status, c.code, c.field)
				if n := s.count("backfill_jobs"); n != 0 {
					t.Errorf("%d jobs started", n)
				}
			})
		}
	})
}

// bootRig is a whole owed process (app.New) with a fake clock and sleep, so a test can stop it
// and start another on the same database.
type bootRig struct {
	t   *testing.T
	cfg app.Config
	clk *clocktest.Fake
}

func (r *bootRig) boot() *app.App {
	r.t.Helper()
	a, err := app.New(context.Background(), r.cfg, app.Options{Clock: clocktest.Stepping{Fake: r.clk}, Log: owedtest.Logger(r.t)})
	if err != nil {
		r.t.Fatalf("app: %v", err)
	}
	if err := a.StartRunners(context.Background()); err != nil {
		r.t.Fatalf("start: %v", err)
	}
	return a
}

func shutdown(t *testing.T, a *app.App) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// Closing the app mid-job and opening a new one on the same database resumes the job where
// its rows stand, without anyone starting it again.
func TestBackfillResumesAfterAppRestart(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		img := image.NewRGBA(image.Rect(0, 0, 10, 10))
		var pngData bytes.Buffer
		png.Encode(&pngData, img)
		reached := make(chan struct{})
		var once sync.Once
		var mu sync.Mutex
		hits := map[string]int{}
		cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits[r.URL.Path]++
			first := r.URL.Path == "/3.png" && hits[r.URL.Path] == 1
			mu.Unlock()
			if first {
				// The first process is stopped while this row is being fetched.
				once.Do(func() { close(reached) })
				<-r.Context().Done()
				return
			}
			w.Write(pngData.Bytes())
		}))
		defer cdn.Close()

		cfg := app.Defaults()
		cfg.DataDir = t.TempDir()
		cfg.DatabaseURL = db
		cfg.AdminToken = owedtest.AdminToken
		cfg.WriteRate = 0
		cfg.MediaAllowPrivate = true // the CDN is on loopback
		rig := &bootRig{t: t, cfg: cfg, clk: clocktest.NewFake(owedtest.Start)}

		first := rig.boot()
		ctx := context.Background()
		guild := "g"
		sc, err := first.Store.CreateScrape(ctx, models.NewScrape{ChatID: "chat", GuildID: &guild, Backend: "puppet", Mode: "history"})
		if err != nil {
			t.Fatal(err)
		}
		var items []models.NewMedia
		for i := 1; i <= 6; i++ {
			items = append(items, models.NewMedia{Kind: "image", URL: fmt.Sprintf("%s/%d.png", cdn.URL, i)})
		}
		if _, err := first.Store.AddMedia(ctx, sc.ID, items); err != nil {
			t.Fatal(err)
		}
		done := models.ScrapeDone
		if _, err := first.Store.UpdateScrape(ctx, sc.ID, &done, nil); err != nil {
			t.Fatal(err)
		}
		if err := first.Backfill.SetSettings(ctx, scheduler.BackfillSettings{BatchSize: 2, BatchPauseMs: 1000}); err != nil {
			t.Fatal(err)
		}
		if err := first.Backfill.StartJobs(ctx, ""); err != nil {
			t.Fatal(err)
		}
		select {
		case <-reached:
		case <-time.After(10 * time.Second):
			t.Fatal("the first process never reached the third row")
		}
		shutdown(t, first)

		second := rig.boot()
		defer shutdown(t, second)
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, err := second.Backfill.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Jobs) == 1 && st.Jobs[0].State == "done" {
				j := st.Jobs[0]
				if j.Cached != 6 || j.Processed != 6 {
					t.Errorf("resumed job: cached %d, processed %d; want 6, 6", j.Cached, j.Processed)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the job did not resume: %+v", st.Jobs)
			}
			time.Sleep(10 * time.Millisecond)
		}
		rows, err := second.Store.ListMedia(ctx, sc.ID, models.MediaCached, 0, 10)
		if err != nil || len(rows) != 6 {
			t.Fatalf("cached rows = %d, %v", len(rows), err)
		}
		for _, m := range rows {
			if _, err := os.Stat(second.Media.PreviewPath(m.ID)); err != nil {
				t.Errorf("preview of %s: %v", m.URL, err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for p, n := range hits {
			if want := map[bool]int{true: 2, false: 1}[p == "/3.png"]; n != want {
				t.Errorf("%s fetched %d times, want %d", p, n, want)
			}
		}
	})
}
