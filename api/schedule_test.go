package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// TestStatsListsTheScheduleAndCronRunsTheSweep: the overview lists the periodic work (robfig/
// cron), each entry with its period, and once the runners run, its next run; and the content
// sweep's entry is what settles a job that falls due with nothing else to wake its runner.
func TestStatsListsTheScheduleAndCronRunsTheSweep(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, func(c *app.Config) { c.SweepEvery = 50 * time.Millisecond })
		want := []struct {
			name    string
			everyMs int64
		}{{"content sweep", 50}, {"backfill queue", 50}, {"backfill deletes", 50}, {"webhook deliveries", 1000}, {"drift", 3600000},
			{"retention pruner", 50}, {"optimize", 3600000}}
		schedule := func() []map[string]any {
			t.Helper()
			r := w.do(http.MethodGet, "/api/admin/stats", asAdmin, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("stats: %d %s", r.Status, r.Body)
			}
			var out []map[string]any
			for _, e := range list(r.JSON()["schedule"]) {
				out = append(out, obj(e))
			}
			if len(out) != len(want) {
				t.Fatalf("schedule = %v, want %d entries", out, len(want))
			}
			for i, e := range out {
				if e["name"] != want[i].name || num(e["everyMs"]) != want[i].everyMs {
					t.Errorf("entry %d = %v, want %s every %d ms", i, e, want[i].name, want[i].everyMs)
				}
			}
			return out
		}
		for _, e := range schedule() {
			if e["nextRunAt"] != nil || e["lastRunAt"] != nil {
				t.Errorf("entry %v has runs before the schedule started", e)
			}
		}

		// A pitch whose screen failed waits a minute (the backoff); nothing wakes the runner
		// when that minute has passed but the sweep's entry.
		w.env.Model.FailNext(1, http.StatusServiceUnavailable, nil)
		pitch := num(obj(w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "hear me"})["pitch"])["id"])
		if j := w.job(models.TaskScreen, models.KindPitch, pitch); j.Why == nil || *j.Why != models.WhyUpstream {
			t.Fatalf("job = %+v, want waiting after an upstream failure", j)
		}
		if err := w.env.App.StartRunners(context.Background()); err != nil {
			t.Fatal(err)
		}
		w.env.Clock.Advance(2 * time.Minute)
		wait.Until(t, "the sweep's entry to settle the pitch", func() bool {
			jobs, err := owedtest.ListJobs(context.Background(), w.store(), models.JobFilter{Task: models.TaskScreen, Kind: models.KindPitch, ItemID: pitch}, 0, 10)
			return err == nil && len(jobs) == 0
		})
		wait.Until(t, "the sweep's entry to have run", func() bool { return schedule()[0]["lastRunAt"] != nil })
		for _, e := range schedule() {
			next, err := time.Parse(time.RFC3339Nano, str(e["nextRunAt"]))
			if err != nil {
				t.Errorf("entry %v: nextRunAt: %v", e, err)
				continue
			}
			if last := str(e["lastRunAt"]); last != "" {
				if prev, err := time.Parse(time.RFC3339Nano, last); err != nil || !next.After(prev) {
					t.Errorf("entry %v runs next before it last ran", e)
				}
			}
		}
	})
}

func str(v any) string { s, _ := v.(string); return s }
