package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/clock"
	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
)

// TestReplicaBehindTakesNoJobTwice: two replicas on one database, one whose clock is 60 s
// behind, with a 20 s lease. The late one claims every job and is still asking the model when
// the other sweeps: read on their own clocks its leases ended 40 s ago, but both keep time by
// the database's clock, so the other claims nothing, and the model is asked once per item. The
// late replica says how far behind it is in /readyz.
func TestReplicaBehindTakesNoJobTwice(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		ctx := context.Background()
		const items = 10
		model := modeltest.New(t)
		var arrived atomic.Int64
		held, release := make(chan struct{}, items), make(chan struct{})
		model.Handle(func(w http.ResponseWriter, r *http.Request) bool {
			if arrived.Add(1) <= items { // the late replica's asks wait until the other has swept
				held <- struct{}{}
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
			return false
		})
		truth := clocktest.NewFake(time.Now()) // a replica's clock, moved only by the test
		replica := func(clk clock.Clock) *app.App {
			cfg := app.Defaults()
			cfg.DataDir, cfg.DatabaseURL, cfg.AdminToken, cfg.ModelURL = t.TempDir(), db, owedtest.AdminToken, model.URL()
			cfg.Lease, cfg.DatabaseMaxConns, cfg.SweepConcurrency, cfg.ModelConcurrency = 20*time.Second, 4, items, items
			a, err := app.New(ctx, cfg, app.Options{Clock: clk, Log: owedtest.Logger(t), DatabaseClock: true})
			if err != nil {
				t.Fatalf("app: %v", err)
			}
			t.Cleanup(func() {
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				a.Shutdown(sctx)
			})
			return a
		}
		onTime := replica(truth)
		late := replica(clock.NewOffset(truth, -60*time.Second))

		author, _, err := onTime.Store.CreateUser(ctx, "ann", models.RoleAuthor)
		if err != nil {
			t.Fatal(err)
		}
		for range items {
			if _, err := onTime.Store.RawExec(ctx, `INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`,
				author.ID, "a pitch", late.Clock.Now().UnixMilli()); err != nil {
				t.Fatal(err)
			}
		}
		swept := make(chan error, 1)
		go func() {
			_, err := late.Content.Sweep(ctx, 0)
			swept <- err
		}()
		for range items {
			select {
			case <-held:
			case <-time.After(10 * time.Second):
				t.Fatalf("the late replica asked the model %d times, want %d", arrived.Load(), items)
			}
		}
		n, err := onTime.Content.Sweep(ctx, 0)
		close(release)
		if err != nil {
			t.Fatal(err)
		}
		if err := <-swept; err != nil {
			t.Fatal(err)
		}
		if n != 0 || model.Calls() != items {
			t.Fatalf("the replica on time claimed %d jobs the late one held; the model was asked %d times for %d items",
				n, model.Calls(), items)
		}
		if got := owedtest.Count(t, onTime.Store, `SELECT COUNT(*) FROM screens`); got != items {
			t.Fatalf("%d verdicts, want %d", got, items)
		}

		for _, c := range []struct {
			a    *app.App
			want string
		}{{onTime, ""}, {late, "behind the database's"}} {
			rec := httptest.NewRecorder()
			c.a.Echo.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			var body map[string]string
			json.Unmarshal(rec.Body.Bytes(), &body)
			if rec.Code != http.StatusOK || (c.want == "") != (body["clock"] == "") || !strings.Contains(body["clock"], c.want) {
				t.Fatalf("/readyz: %d %s; want 200 with clock %q", rec.Code, rec.Body, c.want)
			}
		}
	})
}
