package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// jobsWorld is a quiet world owing five jobs in every state an admin filters by:
//
//	p1  screen pitch    ann  upstream    waiting
//	p2  screen pitch    ben  unanswered  waiting
//	r1  score  revision ann  none        due
//	c1  screen comment  ben  none        due
//	p3  screen pitch    ann  none        leased
type jobsWorld struct {
	*world
	p1, p2, r1, c1, p3 models.Job
}

func newJobsWorld(t *testing.T, db string) *jobsWorld {
	t.Helper()
	w := newWorld(t, db).quiet()
	j := &jobsWorld{world: w}
	m := w.env.Model

	m.Fail(http.StatusServiceUnavailable, nil)
	p1 := w.pitch(asAuthor, "")
	w.sweep()
	m.Reset()
	m.Garbage()
	p2 := w.pitch(asOther, "")
	w.sweep()
	m.Reset()
	song, r1 := w.song(asAuthor, models.VerdictAllow)
	c1 := w.comment(asOther, song, "")
	p3 := w.pitch(asAuthor, "")
	if _, ok, err := w.store().ClaimItem(context.Background(), models.TaskScreen, models.KindPitch, p3, 2*time.Minute, "elsewhere"); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	j.p1 = w.job(models.TaskScreen, models.KindPitch, p1)
	j.p2 = w.job(models.TaskScreen, models.KindPitch, p2)
	j.r1 = w.job(models.TaskScore, models.KindRevision, r1)
	j.c1 = w.job(models.TaskScreen, models.KindComment, c1)
	j.p3 = w.job(models.TaskScreen, models.KindPitch, p3)
	return j
}

func jobIDs(jobs ...models.Job) []int64 {
	var ids []int64
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	return ids
}

// listedJobs lists the ids GET /api/admin/jobs answers for the query.
func (w *world) listedJobs(t *testing.T, query string) []int64 {
	t.Helper()
	r := w.do(http.MethodGet, "/api/admin/jobs"+query, asAdmin, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("jobs%s: %d %s", query, r.Status, r.Body)
	}
	ids := []int64{}
	for _, j := range list(r.JSON()["jobs"]) {
		ids = append(ids, num(obj(j)["id"]))
	}
	return ids
}

// TestAdminJobFilters: each filter selects exactly the jobs it names, alone and combined.
func TestAdminJobFilters(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		j := newJobsWorld(t, db)
		ann, ben := j.uid[asAuthor], j.uid[asOther]
		for _, c := range []struct {
			query string
			want  []int64
		}{
			{"", jobIDs(j.p1, j.p2, j.r1, j.c1, j.p3)},
			{"?task=score", jobIDs(j.r1)},
			{"?task=screen", jobIDs(j.p1, j.p2, j.c1, j.p3)},
			{"?kind=pitch", jobIDs(j.p1, j.p2, j.p3)},
			{"?kind=comment", jobIDs(j.c1)},
			{"?kind=revision", jobIDs(j.r1)},
			{"?why=upstream", jobIDs(j.p1)},
			{"?why=unanswered", jobIDs(j.p2)},
			{"?why=none", jobIDs(j.r1, j.c1, j.p3)},
			{"?why=budget", nil},
			{"?why=budget-unavailable", nil},
			{fmt.Sprintf("?userId=%d", ann), jobIDs(j.p1, j.r1, j.p3)},
			{fmt.Sprintf("?userId=%d", ben), jobIDs(j.p2, j.c1)},
			{"?userId=999", nil},
			{"?state=due", jobIDs(j.r1, j.c1)},
			{"?state=waiting", jobIDs(j.p1, j.p2)},
			{"?state=leased", jobIDs(j.p3)},
			{fmt.Sprintf("?kind=pitch&itemId=%d", j.p2.ItemID), jobIDs(j.p2)},
			{fmt.Sprintf("?task=screen&kind=pitch&userId=%d&state=waiting", ann), jobIDs(j.p1)},
			{fmt.Sprintf("?why=none&userId=%d&state=due", ann), jobIDs(j.r1)},
		} {
			got := j.listedJobs(t, c.query)
			if c.want == nil {
				c.want = []int64{}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("jobs%s = %v, want %v", c.query, got, c.want)
			}
		}
		for _, limit := range []int{1, 2, 4} {
			if got := j.pages(t, "/api/admin/jobs", "jobs", limit); !slices.Equal(got, jobIDs(j.p1, j.p2, j.r1, j.c1, j.p3)) {
				t.Errorf("paging by %d: %v", limit, got)
			}
		}
		// The leased job says until when.
		for _, x := range list(j.do(http.MethodGet, "/api/admin/jobs?state=leased", asAdmin, nil).JSON()["jobs"]) {
			if at := isTime(t, "leaseUntil", obj(x)["leaseUntil"]); !at.Equal(owedtest.Start.Add(2 * time.Minute)) {
				t.Errorf("leaseUntil %v, want the claim's 2 minutes", at)
			}
		}
	})
}

// TestAdminRetry: retrying a waiting job makes it due now (keeping its history); a job that
// is running is not retried (409); the bulk form retries what its filter selects.
func TestAdminRetry(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		j := newJobsWorld(t, db)
		now := owedtest.Start.Format("2006-01-02T15:04:05.000Z")

		r := j.do(http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/retry", j.p1.ID), asAdmin, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("retry: %d %s", r.Status, r.Body)
		}
		job := hasKeys(t, "retried job", r.JSON()["job"], "id", "dueAt", "attempts", "why")
		if num(job["id"]) != j.p1.ID || job["dueAt"] != now || num(job["attempts"]) != 1 || job["why"] != "upstream" {
			t.Errorf("retried job = %v, want due now (%s), its attempt and why kept", job, now)
		}
		if got := j.listedJobs(t, "?state=due"); !slices.Equal(got, jobIDs(j.p1, j.r1, j.c1)) {
			t.Errorf("due after the retry: %v", got)
		}

		before := j.snapshot()
		r = j.do(http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/retry", j.p3.ID), asAdmin, nil)
		checkError(t, r, http.StatusConflict, "leased", "")
		j.unchanged(t, before, "retrying a leased job")

		r = j.do(http.MethodPost, "/api/admin/jobs/retry", asAdmin, map[string]any{"state": "leased"})
		if r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != `{"retried":0,"skipped":{"budget":0,"held":0}}` {
			t.Errorf("bulk retry of leased jobs: %d %s, want {\"retried\":0,…}", r.Status, r.Body)
		}
		j.unchanged(t, before, "bulk-retrying leased jobs")

		r = j.do(http.MethodPost, "/api/admin/jobs/retry", asAdmin, map[string]any{"why": "unanswered", "userId": j.uid[asOther]})
		if r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != `{"retried":1,"skipped":{"budget":0,"held":0}}` {
			t.Errorf("bulk retry: %d %s, want {\"retried\":1,…}", r.Status, r.Body)
		}
		if got := j.listedJobs(t, "?state=waiting"); len(got) != 0 {
			t.Errorf("still waiting after the retries: %v", got)
		}

		// Everything not leased: four jobs, now due; the leased one keeps its lease.
		r = j.do(http.MethodPost, "/api/admin/jobs/retry", asAdmin, map[string]any{})
		if strings.TrimSpace(string(r.Body)) != `{"retried":4,"skipped":{"budget":0,"held":0}}` {
			t.Errorf("retry everything: %s, want {\"retried\":4}", r.Body)
		}
		if got := j.listedJobs(t, "?state=leased"); !slices.Equal(got, jobIDs(j.p3)) {
			t.Errorf("leased after retrying everything: %v", got)
		}

		// Once the lease runs out the job can be retried; and the retried work then runs.
		j.env.Clock.Advance(2*time.Minute + time.Second)
		r = j.do(http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/retry", j.p3.ID), asAdmin, nil)
		if r.Status != http.StatusOK {
			t.Errorf("retry after the lease: %d %s", r.Status, r.Body)
		}
		j.sweep()
		if got := j.listedJobs(t, ""); len(got) != 0 {
			t.Errorf("jobs left after the sweep: %v", got)
		}
		// Settled now: nothing owed to retry.
		checkError(t, j.do(http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/retry", j.p1.ID), asAdmin, nil), http.StatusConflict, "done", "")
		checkError(t, j.do(http.MethodPost, "/api/admin/jobs/999999/retry", asAdmin, nil), http.StatusNotFound, "not_found", "")
	})
}

// TestAdminJobDetail: one job with its attempt history.
func TestAdminJobDetail(t *testing.T) {
	t.Parallel()
	j := newJobsWorld(t, "sqlite:"+t.TempDir()+"/owed.db")
	r := j.do(http.MethodGet, fmt.Sprintf("/api/admin/jobs/%d", j.p1.ID), asAdmin, nil)
	body := r.JSON()
	if num(obj(body["job"])["id"]) != j.p1.ID {
		t.Errorf("job detail: %s", r.Body)
	}
	evs := list(body["events"])
	if len(evs) != 1 || obj(evs[0])["why"] != "upstream" || num(obj(evs[0])["itemId"]) != j.p1.ItemID {
		t.Errorf("events of the job: %v, want its failed attempt", evs)
	}
}

// scoreRefusedByBudget publishes a song of ann's, whose budget has 2 calls left: the screen
// costs 1 (allowed) and the score's 3 runs do not fit in the 1 left. It returns ann's view
// once it shows the score waiting for the budget.
func scoreRefusedByBudget(t *testing.T, w *world) map[string]any {
	t.Helper()
	song := w.created("/api/listeners/songs", asAuthor, map[string]string{"title": "Tide", "code": "s()"})
	if obj(song["screen"])["state"] != "public" {
		t.Fatalf("publish: %v", song)
	}
	var mine map[string]any
	wait.Until(t, "the score refused by the budget", func() bool {
		mine = w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()
		jobs := list(obj(list(mine["items"])[0])["jobs"])
		return len(jobs) == 1 && obj(jobs[0])["why"] == "budget"
	})
	return mine
}

// TestDefaultBudgetShownIsCharged: the configured default limit (OWED_DAILY_BUDGET) is the
// one the runner charges against and the one authors and the admin are shown. (When the api
// and the runner each applied the default, a setting of 0 showed authors a limit of 0 while
// the runner charged against 100.)
func TestDefaultBudgetShownIsCharged(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, func(c *app.Config) { c.DailyBudget = 2 })
		mine := scoreRefusedByBudget(t, w)
		if b := obj(mine["budget"]); num(b["limit"]) != 2 || num(b["spent"]) != 1 {
			t.Errorf("budget in mine = %v, want the default 2, spent 1", b)
		}
		for _, b := range list(w.do(http.MethodGet, "/api/admin/budgets", asAdmin, nil).JSON()["budgets"]) {
			if num(obj(b)["limit"]) != 2 {
				t.Errorf("budget row %v, want the default limit 2", b)
			}
		}
		// A retry is judged against the same limit: the score still cannot be covered.
		r := w.do(http.MethodPost, "/api/admin/jobs/retry", asAdmin, map[string]any{"why": "budget"})
		if n := num(r.JSON()["retried"]); r.Status != http.StatusOK || n != 0 {
			t.Errorf("retry of a job the default cannot cover: %d %s, want none retried", r.Status, r.Body)
		}
	})
}

// TestBudgets: the admin sees each author's spend and limit, and sets a limit of their own;
// the next job the new limit cannot cover waits until midnight UTC.
func TestBudgets(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		path := fmt.Sprintf("/api/admin/users/%d/budget", w.uid[asAuthor])
		r := w.do(http.MethodPut, path, asAdmin, map[string]any{"dailyLimit": 2})
		got := hasKeys(t, "budget", r.JSON(), "userId", "name", "limit", "spent", "resetsAt")
		if r.Status != http.StatusOK || num(got["userId"]) != w.uid[asAuthor] || got["name"] != "ann" || num(got["limit"]) != 2 ||
			num(got["spent"]) != 0 || got["resetsAt"] != "2026-12-01T00:00:00.000Z" {
			t.Fatalf("set budget: %d %s", r.Status, r.Body)
		}

		mine := scoreRefusedByBudget(t, w)
		job := obj(list(obj(list(mine["items"])[0])["jobs"])[0])
		if job["task"] != "score" || job["nextAttemptAt"] != "2026-12-01T00:00:00.000Z" {
			t.Errorf("score job = %v, want it to wait for midnight UTC", job)
		}
		if b := obj(mine["budget"]); num(b["limit"]) != 2 || num(b["spent"]) != 1 {
			t.Errorf("budget in mine = %v, want limit 2, spent 1", b)
		}

		budgets := map[int64]map[string]any{}
		for _, b := range list(w.do(http.MethodGet, "/api/admin/budgets", asAdmin, nil).JSON()["budgets"]) {
			budgets[num(obj(b)["userId"])] = obj(b)
		}
		if b := budgets[w.uid[asAuthor]]; num(b["limit"]) != 2 || num(b["spent"]) != 1 {
			t.Errorf("ann's budget = %v, want limit 2, spent 1", b)
		}
		if b := budgets[w.uid[asOther]]; num(b["limit"]) != 100 || num(b["spent"]) != 0 {
			t.Errorf("ben's budget = %v, want the default 100, nothing spent", b)
		}
		if _, listed := budgets[w.uid[asBot]]; listed {
			t.Errorf("a bot that spent nothing is listed: %v", budgets)
		}

		// Back to the default; the retried score now fits.
		r = w.do(http.MethodPut, path, asAdmin, map[string]any{"dailyLimit": nil})
		if num(r.JSON()["limit"]) != 100 {
			t.Errorf("reset to the default: %s", r.Body)
		}
		w.do(http.MethodPost, "/api/admin/jobs/retry", asAdmin, map[string]any{"why": "budget"})
		w.env.Sweep()
		if b := obj(w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()["budget"]); num(b["spent"]) != 4 {
			t.Errorf("budget after the score = %v, want 4 spent", b)
		}

		// A new UTC day starts a new budget.
		w.env.Clock.Set(time.Date(2026, 12, 1, 0, 0, 1, 0, time.UTC))
		b := obj(w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()["budget"])
		if num(b["spent"]) != 0 || b["resetsAt"] != "2026-12-02T00:00:00.000Z" {
			t.Errorf("budget on the next day = %v", b)
		}
	})
}

// TestEvents: attempts are listed newest first, filtered, and paged without repeats.
func TestEvents(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		j := newJobsWorld(t, db)
		j.do(http.MethodPost, "/api/admin/jobs/retry", asAdmin, map[string]any{})
		j.sweep() // p1, p2, c1 screened, r1 scored
		all := j.pages(t, "/api/admin/events", "events", 100)
		if len(all) != 7 {
			t.Fatalf("events %v, want 2 failed attempts, 4 verdicts (the song's from the fixture) and a score", all)
		}
		if !slices.IsSortedFunc(all, func(a, b int64) int { return int(b - a) }) {
			t.Errorf("events %v are not newest first", all)
		}
		for _, limit := range []int{1, 2, 5} {
			if got := j.pages(t, "/api/admin/events", "events", limit); !slices.Equal(got, all) {
				t.Errorf("paged by %d: %v, want %v", limit, got, all)
			}
		}
		for _, c := range []struct {
			query string
			n     int
			check func(e map[string]any) bool
		}{
			{"?event=score", 1, func(e map[string]any) bool { return e["event"] == "score" }},
			{"?event=screen", 6, func(e map[string]any) bool { return e["event"] == "screen" }},
			{"?why=upstream", 1, func(e map[string]any) bool { return e["why"] == "upstream" }},
			{"?why=none", 5, func(e map[string]any) bool { return e["why"] == nil }},
			{"?outcome=pending", 2, func(e map[string]any) bool { return e["outcome"] == "pending" }},
			{"?kind=pitch", 4, func(e map[string]any) bool { return e["kind"] == "pitch" }},
			{fmt.Sprintf("?userId=%d", j.uid[asOther]), 3, func(e map[string]any) bool { return num(e["userId"]) == j.uid[asOther] }},
			{fmt.Sprintf("?kind=pitch&itemId=%d", j.p1.ItemID), 2, func(e map[string]any) bool { return num(e["itemId"]) == j.p1.ItemID }},
			{fmt.Sprintf("?event=screen&why=none&userId=%d", j.uid[asAuthor]), 2, func(e map[string]any) bool {
				return e["event"] == "screen" && e["why"] == nil && num(e["userId"]) == j.uid[asAuthor]
			}},
		} {
			evs := list(j.do(http.MethodGet, "/api/admin/events"+c.query, asAdmin, nil).JSON()["events"])
			if len(evs) != c.n {
				t.Errorf("events%s: %d, want %d", c.query, len(evs), c.n)
			}
			for _, e := range evs {
				if !c.check(obj(e)) {
					t.Errorf("events%s holds %v", c.query, e)
				}
			}
		}
	})
}

// TestStats: the overview counts the owed jobs by why and task, and the last hour's attempts.
func TestStats(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		j := newJobsWorld(t, db)
		r := j.do(http.MethodGet, "/api/admin/stats", asAdmin, nil)
		st := hasKeys(t, "stats", r.JSON(), "jobs", "settled", "health", "version")
		jobs := hasKeys(t, "stats.jobs", st["jobs"], "total", "due", "leased", "byWhy", "byTask", "oldestDueAt")
		if num(jobs["total"]) != 5 || num(jobs["due"]) != 2 || num(jobs["leased"]) != 1 {
			t.Errorf("jobs = %v, want 5 owed, 2 due, 1 leased", jobs)
		}
		byWhy, byTask := obj(jobs["byWhy"]), obj(jobs["byTask"])
		if num(byWhy["none"]) != 3 || num(byWhy["upstream"]) != 1 || num(byWhy["unanswered"]) != 1 || num(byWhy["budget"]) != 0 {
			t.Errorf("byWhy = %v", byWhy)
		}
		if num(byTask["screen"]) != 4 || num(byTask["score"]) != 1 {
			t.Errorf("byTask = %v", byTask)
		}
		isTime(t, "oldestDueAt", jobs["oldestDueAt"])
		settled := list(st["settled"])
		if len(settled) != 60 {
			t.Fatalf("settled: %d minutes, want the last hour's 60", len(settled))
		}
		last := hasKeys(t, "settled[59]", settled[59], "at", "screen", "score", "pending")
		if num(last["pending"]) != 2 || num(last["screen"]) != 1 || num(last["score"]) != 0 {
			t.Errorf("this minute = %v, want the 2 failed attempts and the song's verdict", last)
		}
		if at := isTime(t, "settled[59].at", last["at"]); !at.Equal(owedtest.Start.Truncate(time.Minute)) {
			t.Errorf("the last minute starts %v, want %v", at, owedtest.Start)
		}
		if obj(st["health"])["database"] != "ok" {
			t.Errorf("health = %v", st["health"])
		}
	})
}
