package frontend_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// TestReviewPanelInChromium: a moderator clears the review queue by keyboard alone (issue 28):
// each entry shows its content, the model's suggestion, the author's history and the appeal's
// note; A allows, B blocks, S skips, N moves on; an entry another moderator claimed says so
// and cannot be decided; the Overview counts unsure and appealed entries; axe finds nothing
// serious in light and dark; at 360 px nothing leaves the screen.
func TestReviewPanelInChromium(t *testing.T) {
	exe := chromiumPath(t)
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db", func(c *app.Config) { c.ReviewBelow = 0.8 })
	ctx := context.Background()
	authorID, authorTok := env.User("ada", models.RoleAuthor)
	_, mod2Tok := env.User("mod2", models.RoleAdmin)
	ok := func(r owedtest.Response, status int, what string) owedtest.Response {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
		return r
	}

	// Four unsure pitches (the model says block at 0.6, below the band), one claimed by mod2,
	// and one appeal of the model's block (0.95).
	env.Model.SetVerdict("block", 0.6)
	var unsure []int64
	for i := range 4 {
		p, err := env.App.Store.CreatePitch(ctx, authorID, fmt.Sprintf("pitch %d: a loud and long idea\nwith a second line", i))
		if err != nil {
			t.Fatal(err)
		}
		unsure = append(unsure, p.ID)
		env.Sweep()
		env.Clock.Advance(time.Second)
	}
	env.Model.SetVerdict("block", 0.95)
	ap, err := env.App.Store.CreatePitch(ctx, authorID, "a pitch the model blocked")
	if err != nil {
		t.Fatal(err)
	}
	appealed := ap.ID
	env.Sweep()
	ok(env.Do(http.MethodPost, fmt.Sprintf("/api/listeners/items/pitch/%d/appeal", appealed), authorTok, map[string]any{"note": "please look again"}), 201, "appeal")
	claimed := unsure[3]
	ok(env.Do(http.MethodPost, fmt.Sprintf("/api/admin/review/pitch/%d/claim", claimed), mod2Tok, nil), 200, "mod2 claims")

	// The browser's clock follows the fake clock.
	offset := time.Until(env.Clock.Now())
	b := newBrowser(t, exe, env.Server.URL, offset)
	t.Cleanup(b.checkProblems)
	b.do(t, "open /admin/", chromedp.Navigate(b.base+"/admin/"), chromedp.WaitVisible(tid("signin-token")))
	b.fill(t, "signin-token", owedtest.AdminToken)
	b.click(t, "signin-submit")
	b.waitJS(t, "the console", jsVisible("panel-overview"))

	// The Overview counts what waits.
	b.waitText(t, "stat-review", "4 unsure · 1 appealed")

	b.tab(t, "review")
	b.waitText(t, "review-counts", "4 unsure · 1 appealed")
	first := fmt.Sprintf("review-entry-pitch-%d", unsure[0])
	b.waitText(t, first, "model suggests block at 60% confidence", "pitch 0: a loud and long idea", "ada", "0 allowed · 1 blocked")
	if os.Getenv("OWED_SCREENSHOTS") != "" {
		b.shot(t, "review")
	}
	b.axeInBothSchemes(t, "review")

	// By keyboard alone: A allows the first; N moves past the second, S skips the third
	// (claimed by mod2: shown as such, not decidable), and B blocks... in order.
	b.do(t, "focus the page", chromedp.Evaluate[chromedp.Void](`document.activeElement && document.activeElement.blur()`))
	b.key(t, "a")
	second := fmt.Sprintf("review-entry-pitch-%d", unsure[1])
	b.waitJS(t, "the second entry", jsVisible(second))
	b.key(t, "n")
	third := fmt.Sprintf("review-entry-pitch-%d", unsure[2])
	b.waitJS(t, "the third entry", jsVisible(third))
	b.key(t, "b")
	claimedEntry := fmt.Sprintf("review-entry-pitch-%d", claimed)
	b.waitText(t, claimedEntry, "claimed by mod2", "cannot be decided here")
	if !eval[bool](t, b, jsEl("review-allow")+`.disabled && `+jsEl("review-block")+`.disabled`) {
		t.Errorf("the buttons of an entry another moderator claimed are not disabled")
	}
	b.key(t, "a") // refused: nothing happens
	b.key(t, "s")
	appealEntry := fmt.Sprintf("review-entry-pitch-%d", appealed)
	b.waitText(t, appealEntry, "appeal", "Blocked by the model at 95% confidence", "please look again")
	b.key(t, "a")
	b.waitJS(t, "back to the second entry", jsVisible(second))
	b.key(t, "b")
	b.waitText(t, "review-empty", "1 you skipped")

	// What the moderator decided, as the API has it.
	want := map[int64]string{unsure[0]: "public", unsure[1]: "blocked", unsure[2]: "blocked", appealed: "public", claimed: "pending"}
	mine := ok(env.Do(http.MethodGet, "/api/listeners/mine", authorTok, nil), 200, "mine").JSON()
	for _, it := range list(mine["items"]) {
		m := obj(it)
		if w, ok := want[num(m["id"])]; ok && m["state"] != w {
			t.Errorf("pitch %d is %v, want %s", num(m["id"]), m["state"], w)
		}
		if num(m["id"]) == appealed && obj(m["appeal"])["state"] != "granted" {
			t.Errorf("the appeal as the author sees it: %v", m["appeal"])
		}
	}
	q := ok(env.Do(http.MethodGet, "/api/admin/review", owedtest.AdminToken, nil), 200, "queue").JSON()
	if e := list(q["entries"]); len(e) != 1 || num(obj(e[0])["id"]) != claimed {
		t.Errorf("left in the queue: %v, want only mod2's claimed entry", q)
	}

	// A team: a later entry opens first, past the older one mod2 holds; showing it claims it,
	// skipping it releases the claim at once; the claim filters show what is free and what is
	// the moderator's own.
	env.Model.SetVerdict("block", 0.6)
	late, err := env.App.Store.CreatePitch(ctx, authorID, "a later pitch")
	if err != nil {
		t.Fatal(err)
	}
	env.Sweep()
	lateEntry := fmt.Sprintf("review-entry-pitch-%d", late.ID)
	claimOf := func(id int64) any {
		for _, e := range list(ok(env.Do(http.MethodGet, "/api/admin/review", owedtest.AdminToken, nil), 200, "queue").JSON()["entries"]) {
			if num(obj(e)["id"]) == id {
				return obj(e)["claim"]
			}
		}
		return nil
	}
	waitClaim := func(what string, mine bool) {
		t.Helper()
		var c any
		if !wait.For(10*time.Second, func() bool {
			c = claimOf(late.ID)
			return (c != nil && obj(c)["mine"] == true) == mine
		}) {
			t.Fatalf("%s: the claim is %v", what, c)
		}
	}
	b.do(t, "reload", chromedp.Navigate(b.base+"/admin/review"))
	b.waitJS(t, "the later entry first, not mod2's", jsVisible(lateEntry))
	waitClaim("shown", true)
	b.do(t, "focus the page", chromedp.Evaluate[chromedp.Void](`document.activeElement && document.activeElement.blur()`))
	b.key(t, "s")
	waitClaim("skipped", false)
	b.waitJS(t, "mod2's entry, all that is left", jsVisible(claimedEntry))
	b.choose(t, "review-claim", "unclaimed") // mod2's is claimed, the later one skipped
	b.waitJS(t, "nothing unclaimed but the skipped", jsVisible("review-empty"))
	b.do(t, "reload", chromedp.Navigate(b.base+"/admin/review"))
	b.waitJS(t, "the later entry again", jsVisible(lateEntry))
	waitClaim("shown again", true)
	b.choose(t, "review-claim", "mine")
	b.waitJS(t, "only the moderator's own (one entry: Next disabled)", jsVisible(lateEntry)+` && `+jsEl("review-next")+`.disabled`)
	b.choose(t, "review-claim", "")

	// At 360 px: the entry and its buttons on screen, no sideways scrolling.
	b.do(t, "reload", chromedp.Navigate(b.base+"/admin/review"))
	b.waitJS(t, "the later entry", jsVisible(lateEntry))
	b.do(t, "a phone", chromedp.EmulateViewport(360, 780, chromedp.EmulateMobile))
	defer b.do(t, "desktop again", chromedp.EmulateViewport(1280, 860))
	onScreen := func(id string) string {
		return `((e) => { if (!e) return false; const r = e.getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= innerWidth; })(` + jsEl(id) + `)`
	}
	b.waitJS(t, "laid out at 360 px", onScreen(lateEntry))
	for _, id := range []string{lateEntry, "review-claim", "review-allow", "review-block", "review-skip", "review-content"} {
		if !eval[bool](t, b, onScreen(id)) {
			t.Errorf("at 360 px %s is off screen", id)
		}
	}
	if w := eval[int](t, b, `document.documentElement.scrollWidth`); w > 360 {
		t.Errorf("the page is %d px wide at 360 px", w)
	}
	for _, v := range b.axeViolations(t) {
		t.Errorf("review at 360 px: %s", v)
	}
	if got := eval[string](t, b, jsText("review-counts")); !strings.Contains(got, "2 unsure · 0 appealed") {
		t.Errorf("counts after clearing: %q", got)
	}
}
