package frontend_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestFocusAfterActionsInChromium: the focus never falls to <body> after an action. Esc on the
// overturn's confirmation gives it back to the Overturn button; lifting the hold gives it to the
// panel the banner stood over; Start all and Pause all keep it on the queue's buttons.
func TestFocusAfterActionsInChromium(t *testing.T) {
	exe := chromiumPath(t)
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db", func(c *app.Config) {
		c.ReviewBelow = 0.8
		c.MediaAllowPrivate = true
	})
	ctx := context.Background()
	authorID, _ := env.User("ada", models.RoleAuthor)
	_, botTok := env.User("archiver", models.RoleBot)
	ok := func(r owedtest.Response, status int, what string) owedtest.Response {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
		return r
	}
	env.Model.SetVerdict("block", 0.6) // unsure: the job waits in review for a verdict by hand
	pitch, err := env.App.Store.CreatePitch(ctx, authorID, "a pitch the model is unsure of")
	if err != nil {
		t.Fatal(err)
	}
	env.Sweep()
	jobs := list(ok(env.Do(http.MethodGet, fmt.Sprintf("/api/admin/jobs?itemId=%d", pitch.ID), owedtest.AdminToken, nil), 200, "jobs").JSON()["jobs"])
	if len(jobs) != 1 {
		t.Fatalf("jobs: %v", jobs)
	}
	job := fmt.Sprint(num(obj(jobs[0])["id"]))
	id := num(ok(env.Do(http.MethodPost, "/api/scrapes", botTok, map[string]any{"chatId": "old-room", "backend": "puppet", "mode": "live"}), 201, "scrape").JSON()["id"])
	ok(env.Do(http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", id), botTok,
		map[string]any{"media": mediaRows("http://127.0.0.1:9", "old-room", "image", 0, 40, 1000)}), http.StatusAccepted, "push media")
	ok(env.Do(http.MethodPatch, fmt.Sprintf("/api/scrapes/%d", id), botTok, map[string]any{"state": "paused", "downloaded": 40}), 200, "pause scrape")

	b := newBrowser(t, exe, env.Server.URL, time.Until(env.Clock.Now()))
	t.Cleanup(b.checkProblems)
	focused := func(what, id string) {
		t.Helper()
		b.waitJS(t, what, `document.activeElement === `+jsEl(id))
	}

	// Esc on the overturn's confirmation: the focus goes back to the Overturn button.
	b.do(t, "open the job", chromedp.Navigate(b.base+"/admin/jobs?job="+job), chromedp.WaitVisible(tid("signin-token")))
	b.fill(t, "signin-token", owedtest.AdminToken)
	b.click(t, "signin-submit")
	b.click(t, "job-decide-block")
	b.click(t, "job-decide-confirm-ok")
	b.waitJS(t, "decided", jsVisible("job-decided"))
	b.fill(t, "job-overturn-note", "fine after all")
	b.click(t, "job-overturn")
	focused("the overturn's confirmation", "job-overturn-confirm-ok")
	b.key(t, kb.Escape)
	focused("the Overturn button after Esc", "job-overturn")

	// Lifting the hold: the banner goes, the focus goes to the panel beneath it.
	ok(env.Do(http.MethodPut, "/api/admin/holds", owedtest.AdminToken, map[string]any{"screen": true}), 200, "hold screens")
	b.tab(t, "backfill")
	b.click(t, "hold-lift")
	b.click(t, "hold-lift-confirm-ok")
	b.waitJS(t, "the banner gone", `!`+jsEl("hold-banner"))
	b.waitJS(t, "the focus on the panel", `document.activeElement === `+jsEl("panel-backfill"))

	// Start all, then Pause all: the focus stays on the queue's buttons.
	b.click(t, "backfill-start-all")
	b.waitExact(t, "backfill-state-old-room", "running")
	focused("Pause all after Start all (nothing left to start)", "backfill-pause-all")
	b.click(t, "backfill-pause-all")
	b.waitJS(t, "paused", `!`+jsEl("backfill-pause-all")+`.disabled || `+jsEl("backfill-start-all")+`.textContent === 'Start all'`)
	b.waitJS(t, "the focus on a queue button after Pause all", `['backfill-start-all', 'backfill-pause-all'].includes(document.activeElement.dataset.testid)`)
	for _, v := range b.axeViolations(t) {
		t.Errorf("backfill: %s", v)
	}
}
