package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// Settled jobs stay in the admin's list as state done for OWED_RETAIN_DONE (7 days): with their
// ids, how they settled and the attempt that did it, filtered and paged like owed jobs; the
// detail of one keeps its whole history; none is retried. The owed list stays the owed jobs.
func TestSettledJobsStayListedAsDone(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		page := func(query string) map[string]any {
			t.Helper()
			r := w.do(http.MethodGet, "/api/admin/jobs"+query, asAdmin, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("GET /api/admin/jobs%s: %d %s", query, r.Status, r.Body)
			}
			return r.JSON()
		}
		ids := func(p map[string]any) []int64 {
			var out []int64
			for _, j := range list(p["jobs"]) {
				out = append(out, num(obj(j)["id"]))
			}
			return out
		}

		// One screen fails once and then allows; another is blocked by hand; a third stays owed.
		w.env.Model.FailNext(1, 503, nil)
		retried := w.pitch(asAuthor, "")
		retriedJob := w.job(models.TaskScreen, models.KindPitch, retried).ID
		w.sweep()
		w.env.Clock.Advance(2 * time.Minute)
		w.sweep()
		w.env.Clock.Advance(time.Minute)
		byHand := w.pitch(asAuthor, "")
		byHandJob := w.job(models.TaskScreen, models.KindPitch, byHand).ID
		if r := w.do(http.MethodPost, verdictPath(models.KindPitch, byHand), asAdmin, map[string]any{"verdict": "block", "note": "spam"}); r.Status != http.StatusOK {
			t.Fatalf("block by hand: %d %s", r.Status, r.Body)
		}
		owed := w.pitch(asAuthor, "")
		owedJob := w.job(models.TaskScreen, models.KindPitch, owed).ID

		if p := page(""); fmt.Sprint(ids(p)) != fmt.Sprint([]int64{owedJob}) || num(p["total"]) != 1 ||
			obj(list(p["jobs"])[0])["state"] != "due" {
			t.Errorf("the owed list: %v", p)
		}
		done := page("?state=done")
		if fmt.Sprint(ids(done)) != fmt.Sprint([]int64{retriedJob, byHandJob}) || num(done["total"]) != 2 {
			t.Fatalf("the settled jobs: %v", done)
		}
		first, second := obj(list(done["jobs"])[0]), obj(list(done["jobs"])[1])
		if first["state"] != "done" || first["outcome"] != "allow" || num(first["attempts"]) != 1 || first["why"] != nil ||
			first["itemTitle"] != "a pitch by author" || num(first["itemId"]) != retried || first["leaseUntil"] != nil {
			t.Errorf("a job settled by the model: %v", first)
		}
		if f := obj(first["final"]); f["outcome"] != "allow" || num(f["attempt"]) != 1 || num(f["jobId"]) != retriedJob {
			t.Errorf("its final attempt: %v", f)
		}
		if f := obj(second["final"]); second["outcome"] != "decided" || f["verdict"] != "block" || num(f["adminId"]) != w.uid[asAdmin] {
			t.Errorf("a job settled by hand: %v", second)
		}

		// Filtered like the rest.
		for query, want := range map[string][]int64{
			"?outcome=decided":                           {byHandJob},
			"?state=done&outcome=allow":                  {retriedJob},
			fmt.Sprintf("?state=done&itemId=%d", byHand): {byHandJob},
			"?state=done&kind=comment":                   nil,
			"?state=done&task=score":                     nil,
			"?state=done&why=none&author=ann":            {retriedJob, byHandJob},
			"?state=done&why=upstream":                   nil,
			"?state=done&sort=due":                       {retriedJob, byHandJob},
			"?state=done&sort=attempts":                  {retriedJob, byHandJob},
		} {
			if got := ids(page(query)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: %v, want %v", query, got, want)
			}
		}
		checkError(t, w.do(http.MethodGet, "/api/admin/jobs?state=due&outcome=allow", asAdmin, nil), 400, "invalid", "outcome")
		checkError(t, w.do(http.MethodGet, "/api/admin/jobs?state=done&outcome=pending", asAdmin, nil), 400, "invalid", "outcome")
		first1 := page("?state=done&limit=1")
		cur, _ := first1["nextCursor"].(string)
		if fmt.Sprint(ids(first1)) != fmt.Sprint([]int64{retriedJob}) || cur == "" {
			t.Fatalf("a page of one: %v", first1)
		}
		if got := ids(page("?state=done&limit=1&cursor=" + cur)); fmt.Sprint(got) != fmt.Sprint([]int64{byHandJob}) {
			t.Errorf("the next page: %v", got)
		}

		// The detail: the whole history; no retry, alone or in bulk.
		r := w.do(http.MethodGet, fmt.Sprintf("/api/admin/jobs/%d", retriedJob), asAdmin, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("a settled job's detail: %d %s", r.Status, r.Body)
		}
		detail := r.JSON()
		var outcomes []string
		for _, e := range list(detail["events"]) {
			outcomes = append(outcomes, fmt.Sprint(obj(e)["outcome"]))
		}
		if obj(detail["job"])["state"] != "done" || fmt.Sprint(outcomes) != "[allow pending]" {
			t.Errorf("a settled job's detail: job %v, attempts %v", detail["job"], outcomes)
		}
		before := w.snapshot()
		checkError(t, w.do(http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/retry", retriedJob), asAdmin, nil), 409, "done", "")
		if r := w.do(http.MethodPost, "/api/admin/jobs/retry", asAdmin, map[string]any{"state": "done"}); r.Status != http.StatusOK || num(r.JSON()["retried"]) != 0 {
			t.Errorf("a bulk retry of settled jobs: %d %s", r.Status, r.Body)
		}
		w.unchanged(t, before, "retries of settled jobs")

		// Past OWED_RETAIN_DONE they are no longer listed.
		w.env.Clock.Advance(168*time.Hour - 30*time.Second) // the first settled 60 s before the second
		if got := ids(page("?state=done")); len(got) != 1 || got[0] != byHandJob {
			t.Errorf("just before the retention of the second: %v", got)
		}
		w.env.Clock.Advance(time.Hour)
		if p := page("?state=done"); len(list(p["jobs"])) != 0 || num(p["total"]) != 0 {
			t.Errorf("past the retention: %v", p)
		}
		checkError(t, w.do(http.MethodGet, fmt.Sprintf("/api/admin/jobs/%d", retriedJob), asAdmin, nil), 404, "not_found", "")
	})
}
