package frontend_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestJobRowsInChromium: the Content jobs rows say what a waiting job waits for. A held job's
// next attempt is the hold's lifting (not a past time), a job in review is due never (no
// relative time), neither offers a Retry the server refuses, nor does a job settled by a
// verdict by hand, which reads "Decided: block by admin".
func TestJobRowsInChromium(t *testing.T) {
	exe := chromiumPath(t)
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db", func(c *app.Config) { c.ReviewBelow = 0.8 })
	ctx := context.Background()
	authorID, _ := env.User("ada", models.RoleAuthor)
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

	// One pitch the model is unsure of (in review), one created under a hold on screens.
	env.Model.SetVerdict("block", 0.6)
	unsure, err := env.App.Store.CreatePitch(ctx, authorID, "a pitch the model is unsure of")
	if err != nil {
		t.Fatal(err)
	}
	env.Sweep()
	review := jobOf(unsure.ID)
	ok(env.Do(http.MethodPut, "/api/admin/holds", owedtest.AdminToken, map[string]any{"screen": true}), 200, "hold screens")
	heldPitch, err := env.App.Store.CreatePitch(ctx, authorID, "a pitch under a hold")
	if err != nil {
		t.Fatal(err)
	}
	env.Sweep()
	held := jobOf(heldPitch.ID)
	env.Clock.Advance(2 * time.Minute) // the held job's due time is past

	offset := time.Until(env.Clock.Now())
	b := newBrowser(t, exe, env.Server.URL, offset)
	t.Cleanup(b.checkProblems)
	b.do(t, "open /admin/jobs", chromedp.Navigate(b.base+"/admin/jobs"), chromedp.WaitVisible(tid("signin-token")))
	b.fill(t, "signin-token", owedtest.AdminToken)
	b.click(t, "signin-submit")
	b.waitText(t, "job-row-"+held, "held")
	next := func(id string) string {
		return eval[string](t, b, jsEl("job-row-"+id)+`.querySelector('.c-next').textContent`)
	}
	hasRetry := func(id string) bool { return eval[bool](t, b, `!!`+jsEl("job-retry-"+id)) }

	// Held: waits for the hold, no Retry.
	if got := next(held); strings.Contains(got, "ago") || !strings.Contains(got, "hold") {
		t.Errorf("a held job's next attempt reads %q, want that it waits for the hold", got)
	}
	if hasRetry(held) {
		t.Errorf("a held job offers Retry")
	}
	// In review (lift the hold first: under it every screen job shows held): due never.
	ok(env.Do(http.MethodPut, "/api/admin/holds", owedtest.AdminToken, map[string]any{"screen": false}), 200, "lift the hold")
	b.do(t, "reload", chromedp.Navigate(b.base+"/admin/jobs?itemId="+fmt.Sprint(unsure.ID)))
	b.waitText(t, "job-row-"+review, "review")
	if got := next(review); strings.Contains(got, "in ") || strings.ContainsAny(got, "0123456789") {
		t.Errorf("a job in review (due never) reads %q as its next attempt", got)
	}
	if hasRetry(review) {
		t.Errorf("a job in review offers Retry")
	}

	b.click(t, "job-detail-"+review)
	b.waitJS(t, "the detail", jsVisible("job-decide-block"))
	if eval[bool](t, b, `!!`+jsEl("job-detail-retry")) {
		t.Errorf("the detail of a job in review offers Retry")
	}

	// Decided by hand (the once held job, due now the hold is lifted): no Retry on it once settled.
	b.do(t, "the once held job", chromedp.Navigate(b.base+"/admin/jobs?job="+held))
	b.waitJS(t, "its detail with Retry", jsVisible("job-decide-block")+` && !!`+jsEl("job-detail-retry"))
	b.click(t, "job-decide-block")
	b.click(t, "job-decide-confirm-ok")
	b.waitJS(t, "decided", jsVisible("job-decided"))
	if got := eval[string](t, b, jsEl("job-decided")+`.querySelector('p').textContent.replace(/\s+/g, ' ')`); !strings.Contains(got, "Decided: block by admin") {
		t.Errorf("the verdict reads %q, want %q", got, "Decided: block by admin")
	}
	if eval[bool](t, b, `!!`+jsEl("job-detail-retry")) {
		t.Errorf("a decided job offers Retry")
	}
	for _, v := range b.axeViolations(t) {
		t.Errorf("jobs: %s", v)
	}
}
