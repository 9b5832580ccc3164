package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/scheduler"
)

// Poison work in the console: a pitch past the model's limits (written by raw SQL, the API
// refuses it) is never sent; each sweep that finds it due records an attempt with why refused
// and a growing backoff, which the jobs list (filtered by why), the job's detail, the counts by
// why and the author's view all show.
func TestRefusedWorkShowsInTheConsole(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		ctx := context.Background()
		var id int64
		if err := w.store().RawScan(ctx, &id, `INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?) RETURNING id`,
			w.uid[asAuthor], strings.Repeat("x", modelclient.MaxTextBytes+1), w.env.Clock.Now().UnixMilli()); err != nil {
			t.Fatal(err)
		}
		for attempt := range 3 {
			if n := w.sweep(); n != 1 {
				t.Fatalf("sweep %d ran %d, want the refused job", attempt, n)
			}
			r := w.do(http.MethodGet, "/api/admin/jobs?why=refused", asAdmin, nil)
			jobs := list(r.JSON()["jobs"])
			if r.Status != http.StatusOK || len(jobs) != 1 {
				t.Fatalf("jobs?why=refused: %d %s", r.Status, r.Body)
			}
			j := obj(jobs[0])
			next := w.env.Clock.Now().Add(scheduler.Backoff(attempt))
			if j["why"] != "refused" || num(j["attempts"]) != int64(attempt+1) || num(j["itemId"]) != id ||
				!isTime(t, "dueAt", j["dueAt"]).Equal(next.Truncate(time.Millisecond)) {
				t.Errorf("attempt %d: job %v, want why refused, %d attempts, due %v", attempt, j, attempt+1, next)
			}
			if e, _ := j["lastError"].(string); !strings.Contains(e, "refused before sending") {
				t.Errorf("lastError %q, want what was refused", e)
			}
			w.env.Clock.Advance(scheduler.Backoff(attempt))
		}
		if w.env.Model.Calls() != 0 {
			t.Errorf("the model got %d calls, want none", w.env.Model.Calls())
		}
		st := w.do(http.MethodGet, "/api/admin/stats", asAdmin, nil).JSON()
		if byWhy := obj(obj(st["jobs"])["byWhy"]); num(byWhy["refused"]) != 1 {
			t.Errorf("byWhy = %v, want refused 1", byWhy)
		}
		mine := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil)
		if mine.Status != http.StatusOK || !strings.Contains(string(mine.Body), `"why":"refused"`) {
			t.Errorf("mine: %d %s, want the job's why refused", mine.Status, mine.Body)
		}
		if evs := w.do(http.MethodGet, "/api/admin/events?why=refused", asAdmin, nil); len(list(evs.JSON()["events"])) != 3 {
			t.Errorf("events?why=refused: %s, want the 3 attempts", evs.Body)
		}
	})
}
