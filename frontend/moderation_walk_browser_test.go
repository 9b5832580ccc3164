package frontend_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// TestModerationWalkInChromium walks an incident and the moderation after it end to end, as an
// operator and two moderators live it: the model goes down while three authors publish; screens
// are held (the Overview still tells the jobs the breaker puts off from the rest); a test call finds the model back; the hold is lifted and the held screens run into
// the review queue; a moderator allows one by A and undoes it from the toast (and blocks another
// by B and undoes it by U); on the item's page
// an overturn without a note is refused at the note, Esc gives the focus back, and an overturn
// with its own note changes the verdict; the author appeals a block by hand, which the blocker
// may not hear and another moderator grants; the item's page shows all of it (attempts with
// their error, every verdict with who and why, the appeal, the audit entries, the webhook
// deliveries), axe finds nothing serious on it, and the audit trail lists every step.
func TestModerationWalkInChromium(t *testing.T) {
	exe := chromiumPath(t)
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db", func(c *app.Config) {
		c.ReviewBelow = 0.8
		c.WebhooksAllowPrivate = true // the receiver is on loopback
	})
	ctx := context.Background()
	st := env.App.Store
	ok := func(r owedtest.Response, status int, what string) owedtest.Response {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
		return r
	}
	toks := map[string]string{}
	for _, name := range []string{"ada", "cy", "dee"} {
		_, toks[name] = env.User(name, models.RoleAuthor)
	}
	_, mod2Tok := env.User("mod2", models.RoleAdmin)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(receiver.Close)
	ok(env.Do(http.MethodPost, "/api/admin/webhooks", owedtest.AdminToken, map[string]any{"url": receiver.URL + "/screens", "events": []string{"item.screened"}}), 201, "webhook")

	// The outage: the model answers 503 while the authors publish; the breaker opens.
	env.Model.Fail(503, nil)
	var pitches []int64
	authors := []string{"ada", "cy", "dee", "ada", "cy", "dee"}
	for i, who := range authors {
		r := ok(env.Do(http.MethodPost, "/api/listeners/pitches", toks[who], map[string]string{"body": fmt.Sprintf("pitch %d by %s: a remix contest\nwith a second line", i, who)}), 201, "publish")
		pitches = append(pitches, num(obj(r.JSON()["pitch"])["id"]))
		env.Clock.Advance(time.Second)
	}
	status, msg := 503, "HTTP 503: fake failure"
	if _, opened, err := st.OpenBreaker(ctx, 10, models.WhyUpstream, &status, &msg, env.Clock.Now().Add(time.Minute)); err != nil || !opened {
		t.Fatalf("open the breaker: %v %v", opened, err)
	}
	env.Clock.Advance(2 * time.Minute) // past the failed screens' backoff: due, but the breaker puts them off

	b := newBrowser(t, exe, env.Server.URL, time.Until(env.Clock.Now()))
	t.Cleanup(b.checkProblems)
	signIn := func(tok string) {
		t.Helper()
		b.do(t, "open /admin/overview", chromedp.Navigate(b.base+"/admin/overview"), chromedp.WaitVisible(tid("signin-token")))
		b.fill(t, "signin-token", tok)
		b.click(t, "signin-submit")
		b.waitJS(t, "the console", jsVisible("panel-overview"))
	}
	toast := func(what, part string) {
		t.Helper()
		b.waitJS(t, what, `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes(`+jsq(part)+`))`)
	}
	focused := func(what, id string) {
		t.Helper()
		b.waitJS(t, what, `document.activeElement === `+jsEl(id))
	}
	signIn(owedtest.AdminToken)
	b.waitText(t, "model-state", "open")
	b.waitText(t, "model-last-error", "HTTP 503")

	// Hold; the model comes back and a test call closes the breaker; the screens stay held.
	b.waitJS(t, "the put-off jobs counted as breaker", jsText("overview-why-breaker")+`.includes('6')`)
	b.click(t, "hold-screen")
	b.waitText(t, "hold-banner", "On hold", "screens")
	b.waitText(t, "overview-held-split", "breaker 6") // the held keep their split
	env.Model.Reset()
	env.Model.SetVerdict("block", 0.6) // unsure: below the review band
	b.click(t, "model-probe")
	b.waitText(t, "model-state", "closed")
	toast("the probe's toast", "Screens stay held")
	if n := len(list(ok(env.Do(http.MethodGet, "/api/admin/review", owedtest.AdminToken, nil), 200, "queue").JSON()["entries"])); n != 0 {
		t.Fatalf("%d entries in review while screens are held", n)
	}

	// Lift: the held screens run at once, into the review queue.
	b.click(t, "hold-lift")
	b.click(t, "hold-lift-confirm-ok")
	b.waitJS(t, "the banner gone", `!`+jsEl("hold-banner"))
	focused("the focus on the panel after the lift", "panel-overview")
	toast("the lift's toast", "Lifted: screens")
	if !wait.For(20*time.Second, func() bool {
		env.Sweep() // as the periodic sweep would
		q := ok(env.Do(http.MethodGet, "/api/admin/review", owedtest.AdminToken, nil), 200, "queue").JSON()
		return num(obj(q["counts"])["unsure"]) == int64(len(pitches))
	}) {
		t.Fatalf("the lifted screens did not reach the review queue: %s %s", env.Do(http.MethodGet, "/api/admin/jobs", owedtest.AdminToken, nil).Body, env.Do(http.MethodGet, "/api/admin/review", owedtest.AdminToken, nil).Body)
	}

	queue := list(ok(env.Do(http.MethodGet, "/api/admin/review", owedtest.AdminToken, nil), 200, "queue").JSON()["entries"])
	walked, next := num(obj(queue[0])["id"]), num(obj(queue[1])["id"])
	item := fmt.Sprintf("pitch/%d", walked)

	// Content jobs link each job to its item's page; so does a review entry.
	jobs := list(ok(env.Do(http.MethodGet, fmt.Sprintf("/api/admin/jobs?kind=pitch&itemId=%d", walked), owedtest.AdminToken, nil), 200, "jobs").JSON()["jobs"])
	if len(jobs) != 1 {
		t.Fatalf("the item's jobs: %v", jobs)
	}
	b.tab(t, "jobs")
	b.click(t, fmt.Sprintf("job-item-page-%d", num(obj(jobs[0])["id"])))
	b.waitJS(t, "the item's page from its job", `location.pathname === '/admin/items/`+item+`' && `+jsVisible("item-page"))
	b.waitText(t, "item-verdict", "no verdict yet")
	b.waitText(t, "item-jobs", "screen job", "review")

	// Decide by A, then Undo from the toast: an overturn by the same moderator, noted "undo".
	b.tab(t, "review")
	first := fmt.Sprintf("review-entry-pitch-%d", walked)
	b.waitText(t, first, "model suggests block at 60% confidence")
	if href := eval[string](t, b, jsEl("review-item-page")+`.getAttribute('href')`); href != "/admin/items/"+item {
		t.Errorf("the review entry links to %q, want its item's page", href)
	}
	b.do(t, "focus the page", chromedp.Evaluate[chromedp.Void](`document.activeElement && document.activeElement.blur()`))
	b.key(t, "a")
	b.waitJS(t, "the next entry", jsVisible(fmt.Sprintf("review-entry-pitch-%d", next)))
	b.click(t, "review-undo")
	toast("the undo's toast", fmt.Sprintf("Undone: pitch #%d is blocked now", walked))
	focused("the focus back on the queue after Undo", "review-allow")
	// By keyboard: B on the next entry, once it can be decided; U undoes it, once its toast
	// offers the Undo.
	b.waitJS(t, "the next entry decidable", jsVisible("review-allow")+` && !`+jsEl("review-allow")+`.disabled`)
	b.do(t, "focus the page", chromedp.Evaluate[chromedp.Void](`document.activeElement && document.activeElement.blur()`))
	b.key(t, "b")
	toast("the block's toast", fmt.Sprintf("Blocked pitch #%d.", next))
	b.key(t, "u")
	toast("the undo's toast", fmt.Sprintf("Undone: pitch #%d is allowed now", next))
	verdicts := func() []any {
		return list(ok(env.Do(http.MethodGet, "/api/admin/items/"+item, owedtest.AdminToken, nil), 200, "item").JSON()["verdicts"])
	}
	if v := verdicts(); len(v) != 2 || obj(v[0])["outcome"] != "decided" || obj(v[1])["outcome"] != "overturned" || obj(v[1])["note"] != "undo" || obj(v[1])["verdict"] != "block" {
		t.Fatalf("verdicts after the undo: %v", v)
	}

	// The item's page, from its event in the Events panel.
	b.do(t, "events of the item", chromedp.Navigate(fmt.Sprintf("%s/admin/events?kind=pitch&itemId=%d", b.base, walked)))
	b.waitJS(t, "the item's events", `!!document.querySelector('[data-testid^="event-item-"]')`)
	b.click(t, eval[string](t, b, `document.querySelector('[data-testid^="event-item-"]').dataset.testid`))
	b.waitJS(t, "the item's page", `location.pathname === '/admin/items/`+item+`' && `+jsVisible("item-page"))
	b.waitText(t, "item-verdict", "blocked")
	b.waitText(t, "item-content", fmt.Sprintf("pitch %d by", slices.Index(pitches, walked)))

	// An overturn without a note: the server's refusal at the note, which takes the focus.
	b.click(t, "item-overturn")
	focused("the overturn's confirmation", "item-overturn-confirm-ok")
	b.click(t, "item-overturn-confirm-ok")
	b.waitText(t, "item-overturn-error", "needs a note of its own")
	focused("the note after the refusal", "item-overturn-note")
	if got := eval[string](t, b, jsEl("item-overturn-note")+`.getAttribute('aria-invalid')`); got != "true" {
		t.Errorf("the refused note's aria-invalid = %q", got)
	}
	// Esc on the confirmation gives the focus back to the button.
	b.fill(t, "item-overturn-note", "a harmless pitch after all")
	b.click(t, "item-overturn")
	focused("the overturn's confirmation", "item-overturn-confirm-ok")
	b.key(t, kb.Escape)
	focused("the Overturn button after Esc", "item-overturn")
	b.click(t, "item-overturn")
	b.click(t, "item-overturn-confirm-ok")
	b.waitText(t, "item-verdict", "allowed")
	focused("the item's heading after the overturn", "item-heading")
	b.waitText(t, "item-verdicts", "a harmless pitch after all")

	// Blocked by hand, with a note; the author appeals.
	b.fill(t, "item-overturn-note", "a spam link in the body")
	b.click(t, "item-overturn")
	b.click(t, "item-overturn-confirm-ok")
	b.waitText(t, "item-verdict", "blocked")
	ok(env.Do(http.MethodPost, "/api/listeners/items/"+item+"/appeal", toks[authors[slices.Index(pitches, walked)]], map[string]any{"note": "there is no link in it"}), 201, "appeal")

	// The blocker may not hear the appeal; another moderator does, and grants it.
	b.tab(t, "review")
	appeal := fmt.Sprintf("review-entry-pitch-%d", walked)
	b.do(t, "the appeals", chromedp.Navigate(b.base+"/admin/review"))
	b.choose(t, "review-reason", "appeal")
	b.waitText(t, appeal, "appeal", "there is no link in it")
	b.waitText(t, "review-same", "another moderator must hear its appeal")
	b.click(t, "signout")
	signIn(mod2Tok)
	b.do(t, "the review queue", chromedp.Navigate(b.base+"/admin/review"))
	b.choose(t, "review-reason", "appeal")
	b.waitText(t, appeal, "there is no link in it", "a spam link in the body")
	b.click(t, "review-allow")
	b.waitJS(t, "the appeal decided", `!`+jsEl(appeal))

	// The item's page shows all of it.
	if _, err := env.App.Webhooks.RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	b.click(t, "review-reason") // leave the select
	b.do(t, "the item's page", chromedp.Navigate(b.base+"/admin/items/"+item))
	b.waitText(t, "item-verdict", "allowed")
	b.waitText(t, "item-author", authors[slices.Index(pitches, walked)])
	b.waitText(t, "item-events", "HTTP 503", "decided", "overturned")
	b.waitText(t, "item-verdicts", "undo", "a harmless pitch after all", "a spam link in the body", "mod2")
	b.waitText(t, "item-appeal", "there is no link in it", "mod2")
	b.waitText(t, "item-audit", "verdict.decide", "verdict.overturn", "appeal.decide", "review.claim")
	b.waitText(t, "item-deliveries", "item.screened", "delivered")
	if n := eval[int](t, b, `document.querySelectorAll('[data-testid^="item-verdict-"]').length`); n != 5 {
		t.Errorf("%d verdicts shown, want 5 (decided, undo, overturn, block by hand, appeal granted)", n)
	}
	if os.Getenv("OWED_SCREENSHOTS") != "" {
		b.shot(t, "item")
	}
	b.axeInBothSchemes(t, "the item's page")
	b.do(t, "a phone", chromedp.EmulateViewport(360, 780, chromedp.EmulateMobile))
	b.waitJS(t, "laid out at 360 px", jsVisible("item-page"))
	if w := eval[int](t, b, `document.documentElement.scrollWidth`); w > 360 {
		t.Errorf("the item's page is %d px wide at 360 px", w)
	}
	for _, v := range b.axeViolations(t) {
		t.Errorf("the item's page at 360 px: %s", v)
	}
	b.do(t, "desktop", chromedp.EmulateViewport(1280, 860))

	// The audit trail lists every step: the item's entries from its page, then the incident's.
	b.click(t, "item-audit-link")
	b.waitJS(t, "the item's audit trail", `location.pathname === '/admin/audit' && location.search.includes('target=pitch')`)
	b.waitText(t, "audit-table", "verdict.decide", "verdict.overturn", "appeal.decide", "review.claim", "mod2", "a spam link in the body")
	if got := eval[string](t, b, jsEl("audit-table")+`.textContent`); strings.Count(got, "verdict.overturn") != 3 {
		t.Errorf("the item's audit trail has %d overturns, want 3 (undo, the note, the block)", strings.Count(got, "verdict.overturn"))
	}
	b.do(t, "the whole trail", chromedp.Navigate(b.base+"/admin/audit"))
	b.waitText(t, "audit-table", "holds.set", "model.probe", "verdict.decide", "verdict.overturn", "appeal.decide")
	b.click(t, eval[string](t, b, `document.querySelector('[data-testid^="audit-item-"]').dataset.testid`))
	b.waitJS(t, "an entry's item links to its page", `location.pathname.startsWith('/admin/items/') && `+jsVisible("item-page"))
}
