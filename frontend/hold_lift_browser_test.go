package frontend_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/owed/owed/owedtest"
)

// TestHoldLiftInChromium: the banner's "Lift the hold" asks first, naming what it lifts, and
// lifts only the holds the operator keeps picked; Esc lifts nothing. The toasts say what runs
// and what stays held: a test call under a hold on screens runs none of them, and the lift
// names what it lifted and what is still held.
func TestHoldLiftInChromium(t *testing.T) {
	exe := chromiumPath(t)
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db")
	ok := func(r owedtest.Response, status int, what string) owedtest.Response {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
		return r
	}
	holds := func() map[string]any {
		return obj(ok(env.Do(http.MethodGet, "/api/admin/holds", owedtest.AdminToken, nil), 200, "holds").JSON())
	}
	ok(env.Do(http.MethodPut, "/api/admin/holds", owedtest.AdminToken, map[string]any{"screen": true, "deliveries": true}), 200, "hold")

	b := newBrowser(t, exe, env.Server.URL, time.Until(env.Clock.Now()))
	t.Cleanup(b.checkProblems)
	b.do(t, "open /admin/jobs", chromedp.Navigate(b.base+"/admin/jobs"), chromedp.WaitVisible(tid("signin-token")))
	b.fill(t, "signin-token", owedtest.AdminToken)
	b.click(t, "signin-submit")
	b.waitText(t, "hold-banner", "screens", "webhook deliveries")

	// Asked first, naming both; Esc lifts nothing and gives the focus back.
	b.click(t, "hold-lift")
	b.waitJS(t, "the confirmation focused", `document.activeElement === `+jsEl("hold-lift-confirm-ok"))
	if got := b.textOf(t, "hold-lift-confirm"); !strings.Contains(got, "screens") || !strings.Contains(got, "webhook deliveries") {
		t.Errorf("the confirmation reads %q, want it to name screens and webhook deliveries", got)
	}
	for _, v := range b.axeViolations(t) {
		t.Errorf("hold banner asking: %s", v)
	}
	b.key(t, kb.Escape)
	b.waitJS(t, "Esc cancels", `!`+jsEl("hold-lift-confirm")+` && document.activeElement === `+jsEl("hold-lift"))
	if h := holds(); h["screen"] != true || h["deliveries"] != true {
		t.Fatalf("Esc lifted a hold: %v", h)
	}

	toast := func(what, part string) {
		t.Helper()
		b.waitJS(t, what, `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes(`+jsq(part)+`))`)
	}
	// A test call under the hold: the model answers, the held screens still do not run.
	b.tab(t, "overview")
	b.click(t, "model-probe")
	toast("the probe's toast", "The model answered")
	if got := eval[string](t, b, `[...document.querySelectorAll('[data-testid="toast"]')].map((e) => e.textContent).join(' | ')`); strings.Contains(got, "run now") || !strings.Contains(got, "Screens stay held") {
		t.Errorf("under a hold on screens the probe toasts %q, want that screens stay held and nothing said to run", got)
	}

	// Keep deliveries held: only screens are lifted.
	b.click(t, "hold-lift")
	b.click(t, "hold-pick-deliveries")
	b.waitJS(t, "the question follows the pick", jsText("hold-lift-confirm")+`.includes('Lift the hold on screens?')`)
	b.click(t, "hold-lift-confirm-ok")
	b.waitJS(t, "the banner names deliveries alone", `!`+jsEl("hold-lift-confirm")+` && !`+jsText("hold-banner")+`.includes('screens')`)
	if h := holds(); h["screen"] != false || h["deliveries"] != true {
		t.Errorf("holds after lifting screens alone = %v", h)
	}
	b.waitJS(t, "the focus back on the button", `document.activeElement === `+jsEl("hold-lift"))
	toast("the lift's toast", "Lifted: screens — the held ones run now. Still held: webhook deliveries")
}
