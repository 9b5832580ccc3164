package frontend_test

import (
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

// TestWalkReleaseInChromium: the Backfill panel releases the walk lock a live walk holds,
// behind a confirmation that Cancel leaves unsent; the release is audited and the walking
// note goes; an idle job's run time reads as the estimate it is.
func TestWalkReleaseInChromium(t *testing.T) {
	exe := chromiumPath(t)
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db", func(c *app.Config) { c.MediaAllowPrivate = true })
	_, botTok := env.User("archiver", models.RoleBot)
	ok := func(r owedtest.Response, status int, what string) owedtest.Response {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
		return r
	}
	scrape := func(chat, state string) {
		t.Helper()
		id := num(ok(env.Do(http.MethodPost, "/api/scrapes", botTok, map[string]any{"chatId": chat, "backend": "puppet", "mode": "live"}), 201, "scrape").JSON()["id"])
		ok(env.Do(http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", id), botTok,
			map[string]any{"media": mediaRows("http://127.0.0.1:9", chat, "image", 0, 40, 1000)}), http.StatusAccepted, "push media")
		if state != "active" {
			ok(env.Do(http.MethodPatch, fmt.Sprintf("/api/scrapes/%d", id), botTok, map[string]any{"state": state, "downloaded": 40}), 200, "patch scrape")
		}
	}
	scrape("old-room", "paused")  // an idle job: never started
	scrape("live-room", "active") // a walk: it holds the lock

	offset := time.Until(env.Clock.Now())
	b := newBrowser(t, exe, env.Server.URL, offset)
	t.Cleanup(b.checkProblems)
	b.do(t, "open /admin/backfill", chromedp.Navigate(b.base+"/admin/backfill"), chromedp.WaitVisible(tid("signin-token")))
	b.fill(t, "signin-token", owedtest.AdminToken)
	b.click(t, "signin-submit")
	b.waitText(t, "backfill-walking", "live-room")

	// The idle job's run time is an estimate, and says so.
	b.waitExact(t, "backfill-state-old-room", "idle")
	if got := b.textOf(t, "backfill-runs-for-old-room"); !strings.HasPrefix(got, "about ") {
		t.Errorf("an idle job's run time reads %q, want it marked as an estimate (\"about …\")", got)
	}

	walking := func() bool {
		return obj(ok(env.Do(http.MethodGet, "/api/backfill", owedtest.AdminToken, nil), 200, "status").JSON())["walkingUntil"] != nil
	}
	// Cancel sends nothing; confirming releases the lock, audited.
	b.click(t, "backfill-walk-release")
	b.waitJS(t, "the confirmation", jsVisible("backfill-walk-confirm"))
	b.click(t, "backfill-walk-confirm-cancel")
	b.waitJS(t, "the confirmation gone", `!`+jsEl("backfill-walk-confirm"))
	if !walking() {
		t.Fatalf("Cancel released the walk lock")
	}
	for _, v := range b.axeViolations(t) {
		t.Errorf("backfill: %s", v)
	}
	b.click(t, "backfill-walk-release")
	b.click(t, "backfill-walk-confirm-ok")
	b.waitJS(t, "the walking note gone", `!`+jsEl("backfill-walking"))
	if walking() {
		t.Errorf("the walk lock still holds after Release")
	}
	audit := ok(env.Do(http.MethodGet, "/api/admin/audit", owedtest.AdminToken, nil), 200, "audit").Body
	if !strings.Contains(string(audit), models.AuditWalkRelease) {
		t.Errorf("no %s in the audit trail: %s", models.AuditWalkRelease, audit)
	}
}
