package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/owed/owed/owedtest"
)

// TestHealthAndReadiness: /healthz answers while the process serves; /readyz only while the
// database answers, and says so in the error shape when it does not.
func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		env := owedtest.NewEnv(t, db)
		for _, path := range []string{"/healthz", "/readyz"} {
			if r := env.Do(http.MethodGet, path, "", nil); r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Errorf("%s: %d %s", path, r.Status, r.Body)
			}
		}
		env.App.Store.Close()
		r := env.Do(http.MethodGet, "/readyz", "", nil)
		checkError(t, r, http.StatusServiceUnavailable, "unavailable", "")
		if r := env.Do(http.MethodGet, "/healthz", "", nil); r.Status != http.StatusOK {
			t.Errorf("healthz without a database: %d, want 200 (the process lives)", r.Status)
		}
	})
}

// TestMetrics: /metrics exposes the owed jobs, attempts, model latency and requests.
func TestMetrics(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "sqlite:"+t.TempDir()+"/owed.db")
	w.env.Model.Fail(http.StatusServiceUnavailable, nil)
	w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "pitch"})
	w.do(http.MethodGet, "/api/no-such-route-4711", asAnon, nil)
	r := w.do(http.MethodGet, "/metrics", asAnon, nil)
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	body := string(r.Body)
	for _, line := range []string{
		`owed_jobs{task="screen",why="upstream"} 1`,
		`owed_attempts_total{event="screen",outcome="pending",why="upstream"} 1`,
		`owed_model_latency_seconds_count{event="screen"} 1`,
		`owed_http_requests_total{method="POST",route="/api/listeners/pitches",status="201"} 1`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("metrics lack %s", line)
		}
	}
	// Unrouted paths do not become label values: a scanner cannot blow the series up.
	if strings.Contains(body, "no-such-route-4711") {
		t.Errorf("an unrouted path became a label")
	}
}

// TestInternalErrorsDoNotLeak: a failing database answers 500 "internal error" and nothing of
// the error's text.
func TestInternalErrorsDoNotLeak(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		if _, err := w.store().RawExec(context.Background(), `DROP TABLE events`); err != nil {
			t.Fatal(err)
		}
		r := w.do(http.MethodGet, "/api/admin/events", asAdmin, nil)
		checkError(t, r, http.StatusInternalServerError, "internal", "")
		if got := obj(r.JSON()["error"])["message"]; got != "internal error" {
			t.Errorf("message %q, want just \"internal error\"", got)
		}
		for _, leak := range []string{"events", "table", "relation", "SQL", "sqlite", "pq", "exist"} {
			if strings.Contains(strings.ToLower(string(r.Body)), strings.ToLower(leak)) {
				t.Errorf("the answer leaks %q: %s", leak, r.Body)
			}
		}
	})
}

// TestUnroutedAndWrongMethod: the router's own refusals come in the error shape too.
func TestUnroutedAndWrongMethod(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "sqlite:"+t.TempDir()+"/owed.db")
	checkError(t, w.do(http.MethodGet, "/api/nothing-here", asAdmin, nil), http.StatusNotFound, "not_found", "")
	checkError(t, w.do(http.MethodGet, "/api/nothing-here", asAnon, nil), http.StatusNotFound, "not_found", "")
	r := w.do(http.MethodDelete, "/api/songs", asAdmin, nil)
	if r.Status != http.StatusMethodNotAllowed && r.Status != http.StatusNotFound {
		t.Errorf("DELETE /api/songs: %d, want 405 (or 404)", r.Status)
	}
	checkError(t, r, r.Status, "", "")
}
