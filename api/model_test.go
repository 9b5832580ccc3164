package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

type modelAnswer struct {
	State       string
	Since       *string
	Failures    int
	NextProbeAt *string
	InFlight    int
	Cap         int
}

// GET /api/admin/model shows the breaker to admins only; while the model is down the breaker
// opens, /readyz stays ready (owed itself is fine), the metrics and a model.breaker delivery
// say so, and writes wait without a charge; the first probe that gets an answer closes it.
func TestModelBreakerIsVisible(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		env := owedtest.NewEnv(t, db, func(c *app.Config) { c.ModelBreaker, c.ModelConcurrency, c.WebhooksAllowPrivate = 3, 5, true })
		_, author := env.User("ann", models.RoleAuthor)
		_, bot := env.User("bot", models.RoleBot)
		for _, who := range []struct {
			token string
			want  int
		}{{"", 401}, {author, 403}, {bot, 403}} {
			if r := env.Do(http.MethodGet, "/api/admin/model", who.token, nil); r.Status != who.want || r.ErrorCode() == "" {
				t.Errorf("GET /api/admin/model as %q: %d %s, want %d", who.token, r.Status, r.Body, who.want)
			}
		}
		get := func() modelAnswer {
			t.Helper()
			r := env.Do(http.MethodGet, "/api/admin/model", env.AdminToken, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("GET /api/admin/model: %d %s", r.Status, r.Body)
			}
			for _, k := range []string{`"state"`, `"since"`, `"failures"`, `"nextProbeAt"`, `"inFlight"`, `"cap"`} {
				if !strings.Contains(string(r.Body), k) {
					t.Fatalf("answer %s lacks %s", r.Body, k)
				}
			}
			var m modelAnswer
			r.Decode(t, &m)
			return m
		}
		if m := get(); m.State != "closed" || m.Since != nil || m.NextProbeAt != nil || m.Cap != 5 || m.InFlight != 0 || m.Failures != 0 {
			t.Fatalf("a new owed's model: %+v", m)
		}
		if r := env.Do(http.MethodPost, "/api/admin/webhooks", env.AdminToken, map[string]any{"url": env.Server.URL + "/hook", "events": []string{"model.breaker"}}); r.Status != http.StatusCreated {
			t.Fatalf("subscribe to model.breaker: %d %s", r.Status, r.Body)
		}

		// The model goes down: writes wait; after three failures the breaker opens.
		env.Model.Fail(503, nil)
		ctx := context.Background()
		for i := range 6 {
			r := env.Do(http.MethodPost, "/api/listeners/pitches", author, map[string]string{"body": fmt.Sprintf("p%d", i)})
			if r.Status != http.StatusCreated {
				t.Fatalf("write: %d %s", r.Status, r.Body)
			}
			if i == 5 {
				// Put off until the probe: why breaker (never tried: no error of its own), no attempt.
				var w struct {
					Screen struct {
						State, NextAttemptAt string
						Why                  *string
						Attempts             int
					}
				}
				r.Decode(t, &w)
				if s := w.Screen; s.State != "pending" || s.Why == nil || *s.Why != "breaker" || s.Attempts != 0 ||
					s.NextAttemptAt != owedtest.Start.Add(5*time.Second).Format("2006-01-02T15:04:05.000Z") {
					t.Errorf("a write with the breaker open answered %s", r.Body)
				}
			}
		}
		m := get()
		if m.State != "open" || m.Since == nil || m.NextProbeAt == nil || m.Failures != 3 {
			t.Fatalf("after the model failed three writes in a row: %+v", m)
		}
		if at, _ := time.Parse(time.RFC3339Nano, *m.NextProbeAt); !at.Equal(owedtest.Start.Add(5 * time.Second)) {
			t.Errorf("next probe at %s, want 5 s after opening", *m.NextProbeAt)
		}
		if env.Model.Calls() != 3 {
			t.Errorf("the model got %d calls, want the 3 that opened the breaker", env.Model.Calls())
		}
		mine := env.Do(http.MethodGet, "/api/listeners/mine", author, nil).JSON()
		if b, _ := mine["budget"].(map[string]any); b == nil || b["spent"] != float64(3) {
			t.Errorf("the author's budget %v, want the 3 calls made", mine["budget"])
		}
		if r := env.Do(http.MethodGet, "/readyz", "", nil); r.Status != http.StatusOK {
			t.Errorf("/readyz with the breaker open: %d", r.Status)
		}
		metrics := scrape(t, env)
		for _, line := range []string{`owed_model_breaker_state{state="open"} 1`, `owed_model_breaker_state{state="closed"} 0`, "owed_model_inflight 0"} {
			if !strings.Contains(metrics, line) {
				t.Errorf("metrics lack %q", line)
			}
		}

		// The model is back: the probe closes the breaker and the writes' jobs drain.
		env.Model.Reset()
		env.Clock.Advance(5 * time.Second)
		env.Sweep()
		if m := get(); m.State != "closed" || m.NextProbeAt != nil || m.Failures != 0 {
			t.Fatalf("after a probe got an answer: %+v", m)
		}
		var payloads []string
		env.App.Store.RawScan(ctx, &payloads, `SELECT payload FROM webhook_deliveries WHERE event = 'model.breaker' ORDER BY id`)
		if len(payloads) != 2 || !strings.Contains(payloads[0], `"state":"open"`) || !strings.Contains(payloads[1], `"state":"closed"`) {
			t.Errorf("model.breaker deliveries %q, want opened then closed", payloads)
		}
	})
}

func scrape(t *testing.T, env *owedtest.Env) string {
	t.Helper()
	res, err := env.Server.Client().Get(env.Server.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}
