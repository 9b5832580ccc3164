package frontend_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestBudgetToastInChromium: a retry the author's spent budget refuses toasts when the budget
// resets as the rest of the console writes times (local, with how far off), not the raw
// timestamp of the server's message.
func TestBudgetToastInChromium(t *testing.T) {
	exe := chromiumPath(t)
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db")
	ctx := context.Background()
	authorID, _ := env.User("ada", models.RoleAuthor)
	ok := func(r owedtest.Response, status int, what string) owedtest.Response {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
		return r
	}
	ok(env.Do(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/budget", authorID), owedtest.AdminToken, map[string]any{"dailyLimit": 1}), 200, "limit")
	if _, err := env.App.Store.CreatePitch(ctx, authorID, "the day's one call"); err != nil {
		t.Fatal(err)
	}
	env.Sweep()
	pitch, err := env.App.Store.CreatePitch(ctx, authorID, "one too many")
	if err != nil {
		t.Fatal(err)
	}
	env.Sweep()
	jobs := list(ok(env.Do(http.MethodGet, fmt.Sprintf("/api/admin/jobs?itemId=%d&why=budget", pitch.ID), owedtest.AdminToken, nil), 200, "jobs").JSON()["jobs"])
	if len(jobs) != 1 {
		t.Fatalf("no job waits for the budget: %v", jobs)
	}
	job := fmt.Sprint(num(obj(jobs[0])["id"]))

	b := newBrowser(t, exe, env.Server.URL, time.Until(env.Clock.Now()))
	t.Cleanup(b.checkProblems)
	b.do(t, "open /admin/jobs", chromedp.Navigate(b.base+"/admin/jobs?why=budget"), chromedp.WaitVisible(tid("signin-token")))
	b.fill(t, "signin-token", owedtest.AdminToken)
	b.click(t, "signin-submit")
	b.click(t, "job-retry-"+job)
	b.waitJS(t, "the refusal's toast", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes('was not retried'))`)
	got := eval[string](t, b, `[...document.querySelectorAll('[data-testid="toast"]')].map((e) => e.textContent).join(' | ')`)
	if raw := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d`); raw.MatchString(got) {
		t.Errorf("the budget toast shows a raw timestamp: %q", got)
	}
	if !regexp.MustCompile(`reset at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(in [0-9hm ]+\)`).MatchString(got) || !strings.Contains(got, "budget") {
		t.Errorf("the budget toast reads %q, want the reset as a local time with how far off", got)
	}
}
