package frontend_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestSettledJobsInChromium: Content jobs lists settled jobs with state done (the State filter's
// "done" option, deep-linked): how each settled (the model's allow, a block by hand with its
// moderator), when, and no Retry or verdict on them; a settled job's detail shows its outcome
// and its attempts. A verdict by hand carries a reason the author sees apart from the note.
func TestSettledJobsInChromium(t *testing.T) {
	exe := chromiumPath(t)
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db")
	ctx := context.Background()
	authorID, authorTok := env.User("ada", models.RoleAuthor)
	ok := func(r owedtest.Response, status int, what string) owedtest.Response {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
		return r
	}
	jobOf := func(itemID int64) string {
		t.Helper()
		jobs := list(ok(env.Do(http.MethodGet, fmt.Sprintf("/api/admin/jobs?itemId=%d", itemID), owedtest.AdminToken, nil), 200, "jobs").JSON()["jobs"])
		if len(jobs) != 1 {
			t.Fatalf("jobs of item %d: %v", itemID, jobs)
		}
		return fmt.Sprint(num(obj(jobs[0])["id"]))
	}

	// One pitch the model allows; one blocked by hand; one still owed under a hold.
	ok(env.Do(http.MethodPut, "/api/admin/holds", owedtest.AdminToken, map[string]any{"screen": true}), 200, "hold screens")
	allowed, err := env.App.Store.CreatePitch(ctx, authorID, "a pitch the model allows")
	if err != nil {
		t.Fatal(err)
	}
	allowedJob := jobOf(allowed.ID)
	blocked, err := env.App.Store.CreatePitch(ctx, authorID, "a pitch blocked by hand")
	if err != nil {
		t.Fatal(err)
	}
	blockedJob := jobOf(blocked.ID)
	ok(env.Do(http.MethodPost, fmt.Sprintf("/api/admin/items/pitch/%d/verdict", blocked.ID), owedtest.AdminToken, map[string]any{"verdict": "block"}), 200, "block by hand")
	ok(env.Do(http.MethodPut, "/api/admin/holds", owedtest.AdminToken, map[string]any{"screen": false}), 200, "lift the hold")
	env.Sweep()
	ok(env.Do(http.MethodPut, "/api/admin/holds", owedtest.AdminToken, map[string]any{"screen": true}), 200, "hold screens again")
	owed, err := env.App.Store.CreatePitch(ctx, authorID, "a pitch still owed")
	if err != nil {
		t.Fatal(err)
	}
	owedJob := jobOf(owed.ID)

	b := newBrowser(t, exe, env.Server.URL, 0)
	t.Cleanup(b.checkProblems)
	b.do(t, "open settled jobs", chromedp.Navigate(b.base+"/admin/jobs?state=done"), chromedp.WaitVisible(tid("signin-token")))
	b.fill(t, "signin-token", owedtest.AdminToken)
	b.click(t, "signin-submit")
	b.waitText(t, "jobs-heading", "Settled jobs")
	b.waitText(t, "job-row-"+allowedJob, "done")
	b.waitText(t, "job-outcome-"+allowedJob, "allow", "conf")
	b.waitText(t, "job-outcome-"+blockedJob, "decided", "block", "by admin")
	if got := eval[string](t, b, jsEl("jobs-filter-state")+`.value`); got != "done" {
		t.Errorf("the State filter reads %q, want done", got)
	}
	if eval[bool](t, b, `!!`+jsEl("job-row-"+owedJob)) {
		t.Errorf("an owed job is listed among the settled ones")
	}
	for _, id := range []string{allowedJob, blockedJob} {
		if eval[bool](t, b, `!!`+jsEl("job-retry-"+id)+` || !!`+jsEl("job-pick-"+id)) {
			t.Errorf("settled job %s offers Retry or a verdict", id)
		}
		if got := eval[string](t, b, jsEl("job-row-"+id)+`.querySelector('.c-next').textContent`); !strings.Contains(got, "settled") {
			t.Errorf("settled job %s's time reads %q", id, got)
		}
	}
	if !eval[bool](t, b, jsEl("jobs-bulk-retry")+`.disabled`) {
		t.Errorf("Retry all matching is offered on settled jobs")
	}

	// Its detail: how it settled, every attempt, nothing to decide or retry.
	b.click(t, "job-detail-"+allowedJob)
	b.waitText(t, "job-detail-outcome", "allow")
	b.waitJS(t, "its attempt", jsEl("job-events")+` && `+jsEl("job-events")+`.querySelectorAll('tbody tr').length === 1`)
	if eval[bool](t, b, `!!`+jsEl("job-decide-block")+` || !!`+jsEl("job-detail-retry")+` || !!`+jsEl("job-detail-gone")) {
		t.Errorf("a settled job's detail offers a verdict or Retry, or says it is gone")
	}
	for _, v := range b.axeViolations(t) {
		t.Errorf("settled jobs: %s", v)
	}

	// The owed list still lists the owed job alone.
	b.do(t, "the owed jobs", chromedp.Navigate(b.base+"/admin/jobs"))
	b.waitText(t, "jobs-heading", "Owed jobs")
	b.waitText(t, "job-row-"+owedJob, "held")
	if eval[bool](t, b, `!!`+jsEl("job-row-"+allowedJob)) {
		t.Errorf("a settled job is listed among the owed ones")
	}

	// A verdict by hand with a note for moderators and a reason for the author: the author sees
	// the reason, never the note; the job is settled now.
	b.click(t, "job-detail-"+owedJob)
	b.fill(t, "job-decide-note", "internal: repeat offender")
	b.fill(t, "job-decide-reason", "Links to spam are not allowed.")
	b.click(t, "job-decide-block")
	b.click(t, "job-decide-confirm-ok")
	b.waitJS(t, "decided", jsVisible("job-decided"))
	mine := string(ok(env.Do(http.MethodGet, "/api/listeners/mine", authorTok, nil), 200, "mine").Body)
	if !strings.Contains(mine, `"reason":"Links to spam are not allowed."`) || strings.Contains(mine, "repeat offender") {
		t.Errorf("the author's view after a verdict with a note and a reason: %s", mine)
	}
	if j := obj(ok(env.Do(http.MethodGet, "/api/admin/jobs/"+owedJob, owedtest.AdminToken, nil), 200, "the job").JSON()["job"]); j["state"] != "done" {
		t.Errorf("the job decided by hand: %v", j)
	}
}
