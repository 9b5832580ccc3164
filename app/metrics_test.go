package app_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
)

// get fetches url with an optional bearer token.
func get(t *testing.T, url, token string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

var screensOwed = regexp.MustCompile(`(?m)^owed_jobs\{task="screen",why="[a-z-]+"\} (\d+)$`)

// TestMetricsTokenAndCachedCounts (issue 23): with OWED_METRICS_TOKEN, /metrics answers 401 in
// the API's error shape without the bearer or with a wrong one, and the figures with it. The
// job gauges come from a count at most 15 s old: a job owed meanwhile shows once the 15 s are
// up, not before (a scrape never runs a full count more than once per 15 s).
func TestMetricsTokenAndCachedCounts(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const token = "metrics-secret-7"
		env := owedtest.NewEnv(t, db, func(c *app.Config) { c.MetricsToken = token })
		url := env.Server.URL + "/metrics"
		for _, bad := range []string{"", "wrong", owedtest.AdminToken} {
			status, body, h := get(t, url, bad)
			if status != http.StatusUnauthorized || !regexp.MustCompile(`"code":"unauthorized"`).MatchString(body) || h.Get("WWW-Authenticate") == "" {
				t.Fatalf("/metrics with %q: %d %s, want 401 unauthorized with WWW-Authenticate", bad, status, body)
			}
		}
		_, author := env.User("author", models.RoleAuthor)
		env.Model.Handle(func(w http.ResponseWriter, r *http.Request) bool { // the screen stays owed
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		})
		scrape := func() string {
			t.Helper()
			status, body, _ := get(t, url, token)
			if status != http.StatusOK {
				t.Fatalf("/metrics with the token: %d %s", status, body)
			}
			n := 0
			for _, m := range screensOwed.FindAllStringSubmatch(body, -1) {
				k, _ := strconv.Atoi(m[1])
				n += k
			}
			return strconv.Itoa(n)
		}
		before := scrape()
		if r := env.Do(http.MethodPost, "/api/listeners/pitches", author, map[string]string{"body": "a pitch"}); r.Status != http.StatusCreated {
			t.Fatalf("pitch: %d %s", r.Status, r.Body)
		}
		env.Clock.Advance(14 * time.Second)
		if got := scrape(); got != before {
			t.Fatalf("14 s after the first scrape the due screens went from %s to %s: counted again", before, got)
		}
		env.Clock.Advance(time.Second)
		if got := scrape(); got != "1" {
			t.Fatalf("15 s after the first scrape %s due screens, want 1", got)
		}
	})
}

// TestMetricsOnTheirOwnListener (issue 23): with OWED_METRICS_ADDR, /metrics is served there
// (behind the token too, when set) and no longer on OWED_ADDR.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	cfg := app.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.AdminToken = owedtest.AdminToken
	cfg.MetricsAddr = "127.0.0.1:0"
	cfg.MetricsToken = "metrics-secret-8"
	a, err := app.New(context.Background(), cfg, app.Options{Clock: clocktest.NewFake(owedtest.Start), Log: owedtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(context.Background(), ln); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Shutdown(ctx)
	}()
	if a.MetricsAddr() == "" {
		t.Fatal("no metrics listener")
	}
	if status, body, _ := get(t, "http://"+ln.Addr().String()+"/metrics", ""); status != http.StatusNotFound {
		t.Fatalf("/metrics on OWED_ADDR: %d %.200s, want 404", status, body)
	}
	if status, _, _ := get(t, "http://"+ln.Addr().String()+"/healthz", ""); status != http.StatusOK {
		t.Fatalf("/healthz on OWED_ADDR: %d", status)
	}
	metrics := "http://" + a.MetricsAddr() + "/metrics"
	if status, _, _ := get(t, metrics, ""); status != http.StatusUnauthorized {
		t.Fatalf("/metrics on its listener without the token: %d, want 401", status)
	}
	if status, body, _ := get(t, metrics, cfg.MetricsToken); status != http.StatusOK || !regexp.MustCompile(`owed_model_inflight`).MatchString(body) {
		t.Fatalf("/metrics on its listener: %d %.200s", status, body)
	}
	if status, _, _ := get(t, "http://"+a.MetricsAddr()+"/api/songs", ""); status != http.StatusNotFound {
		t.Fatalf("the metrics listener serves the API: %d", status)
	}
}
