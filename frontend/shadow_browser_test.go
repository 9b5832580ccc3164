package frontend_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/owed/owed/app"
	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestShadowPanelInChromium: the Shadow panel draws GET /api/admin/shadow of a real owed whose
// live model and candidate disagree on known items, after the live and the shadow sweeps, and
// whose live model then held and drifted against the anchor set — as pictures: a confusion
// matrix per kind with exact counts, the confidence histograms, the flips linked to their
// items' pages, the scatter, the rank shifts, the drift history with its red alert line and
// the drifted runs marked. Promote asks first (Esc cancels, nothing changes), then makes the
// candidate live with the re-score shown; Roll back makes the configured model live again. The
// anchor set is added to and deleted from through the form. axe finds nothing serious, light
// and dark, and at 360 px nothing is wider than the screen.
func TestShadowPanelInChromium(t *testing.T) {
	exe := chromiumPath(t)
	// Past the drift runs, the live model blocks "rude" text at 0.95 and allows the rest at 0.9;
	// the candidate (critic-2, art-v2) blocks "rude" and "spam" at 0.7 and allows the rest at
	// 0.8. Songs s1 … s4 score 0.1 … 0.4 live and 0.8, 0.6, 0.7, 0.5 under the candidate.
	cand := modeltest.New(t)
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db", func(c *app.Config) {
		c.ShadowModelURL, c.ShadowModelName, c.ShadowRubric = cand.URL(), "critic-2", "art-v2"
	})
	cand.AnswerBy(func(text string) (string, float64) {
		if strings.Contains(text, "rude") || strings.Contains(text, "spam") {
			return "block", 0.7
		}
		return "allow", 0.8
	}, func(title string) float64 {
		return map[string]float64{"s1": 0.8, "s2": 0.6, "s3": 0.7, "s4": 0.5}[title]
	})
	ctx := context.Background()
	ok := func(r owedtest.Response, status int, what string) owedtest.Response {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
		return r
	}
	ada, _ := env.User("ada", models.RoleAuthor)
	var songs, revs, comments, pitches []int64
	for i := range 4 {
		s, rev, err := env.App.Store.CreateSong(ctx, ada, fmt.Sprintf("s%d", i+1), `s("bd sd")`)
		if err != nil {
			t.Fatal(err)
		}
		songs, revs = append(songs, s.ID), append(revs, rev.ID)
	}
	// Per kind five agreed allows, one flip (spam) and one agreed block (rude).
	for _, body := range []string{"comment 0", "comment 1", "comment 2", "comment 3", "comment 4", "spam comment", "rude comment"} {
		c, err := env.App.Store.CreateComment(ctx, ada, songs[0], body)
		if err != nil {
			t.Fatal(err)
		}
		comments = append(comments, c.ID)
	}
	for _, body := range []string{"pitch 0", "pitch 1", "pitch 2", "pitch 3", "pitch 4", "spam pitch", "rude pitch"} {
		p, err := env.App.Store.CreatePitch(ctx, ada, body)
		if err != nil {
			t.Fatal(err)
		}
		pitches = append(pitches, p.ID)
	}
	// The anchor set: four pitches expected allowed, a revision with its reference art.
	for _, p := range pitches[:4] {
		ok(env.Do(http.MethodPost, "/api/admin/anchors", owedtest.AdminToken, map[string]any{"kind": "pitch", "itemId": p, "verdict": "allow"}), 201, "anchor")
	}
	ok(env.Do(http.MethodPost, "/api/admin/anchors", owedtest.AdminToken, map[string]any{"kind": "revision", "itemId": revs[0], "art": 0.5}), 201, "anchor")
	// The live model holds for five runs a day apart, then drifts for three (one alert).
	env.Model.SetVerdict("allow", 0.95)
	drifted := 0
	for i := range 8 {
		if i == 5 {
			env.Model.SetVerdict("block", 0.9)
		}
		env.Clock.Advance(24 * time.Hour)
		out, err := env.App.Drift.Run(ctx)
		if err != nil || out.Run == nil {
			t.Fatalf("drift run %d: %+v %v", i, out, err)
		}
		if out.Run.Drifted {
			drifted++
		}
	}
	if drifted != 3 {
		t.Fatalf("%d drifted runs, want 3", drifted)
	}
	// Then the items are screened and scored live, and the candidate asked the same: eighteen
	// screens, four scores of three calls each.
	env.Model.AnswerBy(func(text string) (string, float64) {
		if strings.Contains(text, "rude") {
			return "block", 0.95
		}
		return "allow", 0.9
	}, func(title string) float64 {
		return map[string]float64{"s1": 0.1, "s2": 0.2, "s3": 0.3, "s4": 0.4}[title]
	})
	if n := env.Sweep(); n != 22 { // eighteen screens, four scores
		t.Fatalf("the live sweep ran %d, want 22", n)
	}
	if n, err := env.App.Content.SweepShadow(ctx); err != nil || n != 22 {
		t.Fatalf("the shadow sweep ran %d (%v), want 22", n, err)
	}
	shadow := func() map[string]any {
		t.Helper()
		return ok(env.Do(http.MethodGet, "/api/admin/shadow", owedtest.AdminToken, nil), 200, "shadow").JSON()
	}
	rescored := func(rubric string) bool {
		r := obj(shadow()["rescore"])
		return r["rubric"] == rubric && num(r["total"]) == 4 && num(r["done"]) == 4
	}
	if calls := obj(shadow()["calls"]); num(calls["today"]) != 30 || num(calls["owed"]) != 0 {
		t.Fatalf("shadow calls %v, want 30 today and none owed", calls)
	}
	srv := httptest.NewServer(env.App.Echo)
	t.Cleanup(srv.Close)

	b := newBrowser(t, exe, srv.URL, time.Until(env.Clock.Now()))
	t.Cleanup(b.checkProblems)
	b.do(t, "desktop", chromedp.EmulateViewport(1280, 900))
	b.do(t, "open /admin/shadow", chromedp.Navigate(b.base+"/admin/shadow"), chromedp.WaitVisible(tid("signin-token")))
	b.fill(t, "signin-token", owedtest.AdminToken)
	b.click(t, "signin-submit")
	b.waitJS(t, "the shadow panel", jsVisible("panel-shadow")+` && `+jsVisible("shadow-drift-chart"))
	if eval[bool](t, b, jsVisible("tabs-more")) {
		t.Errorf("at 1280 px the tabs need a More menu")
	}

	// The names and counts, as the real answer gives them.
	b.waitText(t, "shadow-live", "critic · art-v1")
	b.waitText(t, "shadow-candidate", "critic-2 · art-v2")
	b.waitText(t, "shadow-calls", "30 / 1,000", "0 owed")
	b.waitText(t, "shadow-compared", "18 screens · 4 scores")
	b.waitExact(t, "shadow-agreement", "88.9%")
	b.waitText(t, "shadow-rescore", "4 of 4", "art-v1")
	if eval[bool](t, b, jsEl("shadow-rollback")+`.disabled`) == false {
		t.Errorf("Rollback is offered while the configured model is live")
	}
	// The confusion matrices, cell by cell.
	for cell, want := range map[string]string{
		"revision-allow-allow": "4", "revision-allow-block": "0", "revision-block-allow": "0", "revision-block-block": "0",
		"comment-allow-allow": "5", "comment-allow-block": "1", "comment-block-allow": "0", "comment-block-block": "1",
		"pitch-allow-allow": "5", "pitch-allow-block": "1", "pitch-block-allow": "0", "pitch-block-block": "1",
	} {
		if got := b.textOf(t, "shadow-cell-"+cell); got != want {
			t.Errorf("matrix cell %s reads %q, want %q", cell, got, want)
		}
	}
	// The histograms: a bar per model per bin, drawn where the verdicts are: every live one in
	// 0.9–1, the candidate's in 0.7–0.8 (its blocks) and 0.8–0.9 (its allows).
	if n := eval[int](t, b, jsEl("shadow-confidence")+`.querySelectorAll('svg.sh-svg rect.sh-live, svg.sh-svg rect.sh-cand').length`); n != 20 {
		t.Errorf("%d histogram bars, want 20", n)
	}
	bars := eval[[]string](t, b, `[...`+jsEl("shadow-confidence")+`.querySelectorAll('svg.sh-svg rect')].filter((r) => +r.getAttribute('height') > 0).map((r) => r.querySelector('title').textContent)`)
	if got := strings.Join(bars, "; "); got != "candidate, confidence 0.7–0.8: 4 (22.2%); candidate, confidence 0.8–0.9: 14 (77.8%); live, confidence 0.9–1.0: 18 (100.0%)" {
		t.Errorf("histogram bars drawn: %s", got)
	}
	// The scatter: a point per song, each off the diagonal (the candidate scores 0.1 to 0.7 higher).
	if n := eval[int](t, b, jsEl("shadow-scatter")+`.querySelectorAll('circle').length`); n != 4 {
		t.Errorf("%d scatter points, want 4", n)
	}
	if n := eval[int](t, b, jsEl("shadow-scatter")+`.querySelectorAll('circle.sh-pt-off').length`); n != 4 {
		t.Errorf("%d points marked off the diagonal, want 4", n)
	}
	b.waitText(t, "shadow-mean-diff", "+0.400")
	b.waitText(t, "shadow-spearman", "-0.800")
	// Live order s4 s3 s2 s1, the candidate's s1 s3 s2 s4: s1 moves up three, s4 down three.
	b.waitText(t, fmt.Sprintf("shadow-mover-%d", songs[0]), "s1", "4 → 1")
	b.waitText(t, fmt.Sprintf("shadow-mover-%d", songs[3]), "s4", "1 → 4")
	if up, down := eval[int](t, b, jsEl("shadow-movers")+`.querySelectorAll('.sh-up').length`), eval[int](t, b, jsEl("shadow-movers")+`.querySelectorAll('.sh-down').length`); up != 1 || down != 1 {
		t.Errorf("rank shifts: %d up, %d down; want 1 and 1", up, down)
	}
	// The flips, the spam comment and the spam pitch, each linked to its item's page.
	for _, f := range []struct {
		kind string
		id   int64
	}{{"comment", comments[5]}, {"pitch", pitches[5]}} {
		href := eval[string](t, b, jsEl(fmt.Sprintf("shadow-flip-%s-%d", f.kind, f.id))+`.getAttribute('href')`)
		if href != fmt.Sprintf("/admin/items/%s/%d", f.kind, f.id) {
			t.Errorf("the %s flip links to %q", f.kind, href)
		}
	}
	if n := eval[int](t, b, jsEl("shadow-flips")+`.querySelectorAll('tbody tr').length`); n != 2 {
		t.Errorf("%d flips listed, want 2", n)
	}

	// The drift history: eight runs, three marked drifted, the red line at the alert (0.9 of the
	// chart's height above its floor), the alert raised once.
	if n := eval[int](t, b, jsEl("shadow-drift-chart")+`.querySelectorAll('[data-testid="shadow-drift-chart-drifted"]').length`); n != 3 {
		t.Errorf("%d drifted runs marked, want 3", n)
	}
	if n := eval[int](t, b, jsEl("shadow-drift-chart")+`.querySelectorAll('[data-testid="shadow-drift-chart-run"]').length`); n != 5 {
		t.Errorf("%d runs in bounds drawn, want 5", n)
	}
	line := eval[map[string]any](t, b, `((l) => ({v: l.dataset.value, y: +l.getAttribute('y1'), stroke: getComputedStyle(l).stroke}))(`+jsEl("shadow-drift-chart-alert")+`)`)
	// The chart's plot is 126 units high from y 8: agreement 0.9 sits a tenth of it below the top.
	if y, _ := line["y"].(float64); line["v"] != "0.9" || y < 20.59 || y > 20.61 || line["stroke"] != "rgb(194, 43, 43)" {
		t.Errorf("the alert line %v, want at 0.9 and red", line)
	}
	b.waitText(t, "shadow-drift-last", "drifted", "5 compared")
	b.waitText(t, "shadow-drift-summary", "8 runs shown, 3 drifted")
	if n := eval[int](t, b, `[...`+jsEl("shadow-drift-chart")+`.querySelectorAll('text')].filter((e) => e.textContent === '▲').length`); n != 1 {
		t.Errorf("%d runs marked as raising model.drift, want 1", n)
	}

	// Promote asks first; Esc sends nothing, the confirmation makes the candidate live, and its
	// songs owe a re-score, shown under way or done.
	b.click(t, "shadow-promote")
	b.waitJS(t, "the confirmation focused", `document.activeElement === `+jsEl("shadow-promote-confirm-ok"))
	b.waitText(t, "shadow-promote-confirm", "critic-2 · art-v2", "art-v1")
	for _, v := range b.axeViolations(t) {
		t.Errorf("promote asking: %s", v)
	}
	b.key(t, kb.Escape)
	b.waitJS(t, "Esc cancels", `!`+jsEl("shadow-promote-confirm"))
	if a := shadow(); a["promoted"] != false {
		t.Fatalf("Esc promoted: %v", a["live"])
	}
	b.click(t, "shadow-promote")
	b.click(t, "shadow-promote-confirm-ok")
	b.waitText(t, "shadow-live", "critic-2 · art-v2", "promoted")
	b.waitText(t, "shadow-rescore", "0 of 4", "art-v2", "re-scoring 4 as a backfill", "rate not known yet")
	if a := shadow(); a["promoted"] != true || obj(a["live"])["rubric"] != "art-v2" {
		t.Fatalf("after Promote: promoted %v, live %v", a["promoted"], a["live"])
	}
	// One song re-scored a minute after the promotion: the rate, and the rest's ETA.
	if out := <-env.App.Content.RunItem("score", "revision", revs[0]); out != "done" {
		t.Fatalf("the re-score of s1: %s", out)
	}
	env.Clock.Advance(time.Minute)
	b.do(t, "reload", chromedp.Navigate(b.base+"/admin/shadow"))
	b.waitText(t, "shadow-rescore", "1 of 4", "art-v2", "re-scoring 3 as a backfill", "1.0 a minute", "done in")
	if n := env.Sweep(); n != 3 || !rescored("art-v2") {
		t.Fatalf("the rest of the re-score ran %d, want 3, and left %v", n, shadow()["rescore"])
	}
	if eval[bool](t, b, jsEl("shadow-promote")+`.disabled`) == false {
		t.Errorf("Promote is offered while the candidate is live")
	}
	b.click(t, "shadow-rollback")
	b.click(t, "shadow-rollback-confirm-ok")
	b.waitText(t, "shadow-live", "critic · art-v1")
	b.waitText(t, "shadow-rescore", "0 of 4", "art-v1", "re-scoring 4 as a backfill")
	if a := shadow(); a["promoted"] != false || obj(a["live"])["rubric"] != "art-v1" {
		t.Fatalf("after Roll back: promoted %v, live %v", a["promoted"], a["live"])
	}
	if n := env.Sweep(); n != 4 || !rescored("art-v1") {
		t.Fatalf("the rollback's re-score ran %d, want 4, and left %v", n, shadow()["rescore"])
	}
	if n := env.Data().Count(`SELECT COUNT(*) FROM audit WHERE action IN ('model.promote', 'model.rollback')`); n != 2 {
		t.Errorf("%d promotions and rollbacks audited, want 2", n)
	}

	// The anchor set: a missing item is refused in the form's words; a real one is added and
	// deleted.
	b.waitJS(t, "the anchors", jsVisible("anchors-table"))
	b.choose(t, "anchor-kind", "comment")
	b.fill(t, "anchor-item", "999999")
	b.choose(t, "anchor-verdict", "block")
	b.click(t, "anchor-add")
	b.waitText(t, "anchor-error", "comment not found")
	b.fill(t, "anchor-item", fmt.Sprint(comments[4]))
	b.click(t, "anchor-add")
	b.waitJS(t, "the new anchor", `[...document.querySelectorAll('[data-testid^="anchor-row-"]')].length === 6`)
	anchors := list(obj(ok(env.Do(http.MethodGet, "/api/admin/anchors", owedtest.AdminToken, nil), 200, "anchors").JSON())["anchors"])
	added := obj(anchors[len(anchors)-1])
	if len(anchors) != 6 || added["kind"] != "comment" || num(added["itemId"]) != comments[4] || added["verdict"] != "block" {
		t.Fatalf("anchors after the form: %v", anchors)
	}
	b.waitText(t, "shadow-drift-anchors", "6")
	id := fmt.Sprint(num(added["id"]))
	b.click(t, "anchor-delete-"+id)
	b.click(t, "anchor-delete-confirm-"+id)
	b.waitJS(t, "the anchor gone", `!`+jsEl("anchor-row-"+id))
	if n := len(list(env.Do(http.MethodGet, "/api/admin/anchors", owedtest.AdminToken, nil).JSON()["anchors"])); n != 5 {
		t.Errorf("%d anchors after the delete, want 5", n)
	}

	b.axeInBothSchemes(t, "shadow")
	if os.Getenv("OWED_SCREENSHOTS") != "" {
		b.shot(t, "shadow")
	}

	// A phone: every chart on screen, nothing wider than it.
	b.do(t, "a phone", chromedp.EmulateViewport(360, 780, chromedp.EmulateMobile))
	b.waitJS(t, "the panel at 360 px", jsVisible("shadow-drift-chart"))
	if w := eval[int](t, b, `document.documentElement.scrollWidth`); w > 360 {
		t.Errorf("the page is %d px wide at 360 px", w)
	}
	for _, id := range []string{"shadow-matrix-comment", "shadow-confidence", "shadow-scatter", "shadow-movers", "shadow-drift-chart", "shadow-drift-art-chart", "anchor-add"} {
		if !eval[bool](t, b, `((e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= innerWidth; })(`+jsEl(id)+`)`) {
			t.Errorf("at 360 px %s is cut off", id)
		}
	}
	for _, v := range b.axeViolations(t) {
		t.Errorf("shadow at 360 px: %s", v)
	}
	if strings.Contains(b.snapshot(), "NaN") || strings.Contains(b.snapshot(), "undefined") {
		t.Errorf("the panel shows NaN or undefined:\n%s", b.snapshot())
	}
}
