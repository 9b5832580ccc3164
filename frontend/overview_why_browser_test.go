package frontend_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestOverviewWhyLinksInChromium: each row of the Overview's "Owed jobs by why" is a link that
// looks like one, and a click anywhere on it (here its bar) opens Content jobs filtered by that
// why.
func TestOverviewWhyLinksInChromium(t *testing.T) {
	exe := chromiumPath(t)
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db")
	authorID, _ := env.User("ada", models.RoleAuthor)
	if r := env.Do(http.MethodPut, "/api/admin/holds", owedtest.AdminToken, map[string]any{"screen": true}); r.Status != 200 {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	if _, err := env.App.Store.CreatePitch(context.Background(), authorID, "a pitch under a hold"); err != nil {
		t.Fatal(err)
	}
	env.Sweep()

	b := newBrowser(t, exe, env.Server.URL, time.Until(env.Clock.Now()))
	t.Cleanup(b.checkProblems)
	b.do(t, "open /admin/overview", chromedp.Navigate(b.base+"/admin/overview"), chromedp.WaitVisible(tid("signin-token")))
	b.fill(t, "signin-token", owedtest.AdminToken)
	b.click(t, "signin-submit")
	b.waitJS(t, "the held row", jsEl("overview-why-held")+`?.querySelector('.bars-n').textContent.trim() === '1'`)
	if !eval[bool](t, b, `getComputedStyle(`+jsEl("overview-why-held")+`.querySelector('.bars-label')).textDecorationLine.includes('underline')`) {
		t.Errorf("the by-why label does not look like a link")
	}
	for _, v := range b.axeViolations(t) {
		t.Errorf("overview: %s", v)
	}
	b.click(t, "overview-why-held")
	b.waitJS(t, "Content jobs filtered by held", jsVisible("panel-jobs")+` && new URLSearchParams(location.search).get('why') === 'held' && location.pathname === '/admin/jobs'`)
	b.waitText(t, "jobs-count", "1 matching")
}
