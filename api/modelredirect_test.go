package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestModelRedirectIsNotFollowed (issue 23): the model URL answers 307 to another server, which
// stands in for an internal address (a metadata service). No request reaches it, the author's
// text stays home, and the internal server's answer appears nowhere an operator looks: not in
// the job's lastError, not in the events. What is kept is the status line.
func TestModelRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const secret = "SECRET-METADATA-TOKEN=abc123"
		var internalHits atomic.Int64
		internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			internalHits.Add(1)
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"verdict":"allow","confidence":0.9,"note":"` + secret + `"}`))
		}))
		defer internal.Close()
		relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, internal.URL+"/latest/meta-data", http.StatusTemporaryRedirect)
		}))
		defer relay.Close()

		env := owedtest.NewEnv(t, db, func(c *app.Config) { c.ModelURL = relay.URL + "/relay" })
		_, author := env.User("author", models.RoleAuthor)
		r := env.Do(http.MethodPost, "/api/listeners/pitches", author, map[string]string{"body": "my private pitch"})
		if r.Status != http.StatusCreated {
			t.Fatalf("pitch: %d %s", r.Status, r.Body)
		}
		env.Sweep()
		if n := internalHits.Load(); n != 0 {
			t.Fatalf("the internal server got %d requests", n)
		}
		jobs := env.Do(http.MethodGet, "/api/admin/jobs", env.AdminToken, nil)
		events := env.Do(http.MethodGet, "/api/admin/events", env.AdminToken, nil)
		mine := env.Do(http.MethodGet, "/api/listeners/mine", author, nil)
		for name, res := range map[string]owedtest.Response{"jobs": jobs, "events": events, "mine": mine} {
			if res.Status != http.StatusOK {
				t.Fatalf("%s: %d %s", name, res.Status, res.Body)
			}
			if strings.Contains(string(res.Body), secret) || strings.Contains(string(res.Body), "meta-data") {
				t.Errorf("%s shows the internal answer or address: %s", name, res.Body)
			}
		}
		if !strings.Contains(string(jobs.Body), "HTTP 307: a redirect to another origin, not followed") {
			t.Errorf("the job's lastError does not say a redirect was refused: %s", jobs.Body)
		}
	})
}

// TestModelIgnoresEnvironmentProxy: HTTP_PROXY in the environment is not used by the model
// client; OWED_MODEL_PROXY is.
func TestModelIgnoresEnvironmentProxy(t *testing.T) {
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer proxy.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	// A name that is not loopback (net/http never proxies loopback): were the environment's
	// proxy used, it would get the call.
	for _, viaSetting := range []bool{false, true} {
		env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db", func(c *app.Config) {
			c.ModelURL = "http://model.invalid/relay"
			if viaSetting {
				c.ModelProxy = proxy.URL
			}
		})
		_, author := env.User("author", models.RoleAuthor)
		if r := env.Do(http.MethodPost, "/api/listeners/pitches", author, map[string]string{"body": "a pitch"}); r.Status != http.StatusCreated {
			t.Fatalf("pitch: %d %s", r.Status, r.Body)
		}
		if n := proxied.Load(); viaSetting != (n > 0) {
			t.Fatalf("OWED_MODEL_PROXY set: %v; the proxy got %d model calls", viaSetting, n)
		}
	}
}
