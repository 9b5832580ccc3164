package app_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/owedtest"
)

// TestPruneRunsOnOneReplicaAndIsMeasured: of two replicas on one database, the one holding the
// pruning lease prunes; the other does nothing until that lease runs out. What was pruned shows
// in /metrics, and the overview shows the retention.
func TestPruneRunsOnOneReplicaAndIsMeasured(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		retain := func(c *app.Config) { c.RetainEvents = 48 * time.Hour }
		one := owedtest.NewEnv(t, db, retain)
		two := owedtest.NewEnv(t, db, retain)
		ctx := context.Background()
		old := one.Clock.Now().Add(-72 * time.Hour).UnixMilli()
		for i := range 3 {
			if _, err := one.App.Store.RawExec(ctx, `INSERT INTO events (at, event, kind, item_id, user_id, outcome, attempt)
				VALUES (?, 'screen', 'pitch', ?, 1, 'allow', 1)`, old+int64(i), i); err != nil {
				t.Fatal(err)
			}
		}
		if pruned, err := one.App.PruneOnce(ctx); err != nil || !pruned {
			t.Fatalf("first replica: pruned=%v %v", pruned, err)
		}
		if pruned, err := two.App.PruneOnce(ctx); err != nil || pruned {
			t.Fatalf("second replica pruned=%v %v while the first holds the lease", pruned, err)
		}
		two.Clock.Advance(11 * time.Minute)
		if pruned, err := two.App.PruneOnce(ctx); err != nil || !pruned {
			t.Fatalf("second replica after the lease ran out: pruned=%v %v", pruned, err)
		}
		var left int64
		one.App.Store.RawScan(ctx, &left, `SELECT COUNT(*) FROM events`)
		if left != 0 {
			t.Errorf("%d events older than the retention left", left)
		}
		res, err := http.Get(one.Server.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !strings.Contains(string(body), `owed_pruned_rows_total{table="events"} 3`) {
			t.Errorf("/metrics does not count the 3 pruned events:\n%s", grep(string(body), "owed_pruned"))
		}
		st := one.Do(http.MethodGet, "/api/admin/stats", one.AdminToken, nil).JSON()
		if r, _ := st["retention"].(map[string]any); r["events"] != "2d" || r["deliveries"] != "30d" {
			t.Errorf("overview retention = %v, want events 2d, deliveries 30d", st["retention"])
		}
	})
}

func grep(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
