package frontend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// shadowFixture is the candidate's members of GET /api/admin/shadow (docs/shadow.md), as two
// models that disagree on known items answer them: comments flipped 3 + 1, pitches 2, songs
// scored higher by the candidate with a few moved far. The flips name real items.
func shadowFixture(comments, pitches []int64, at time.Time) map[string]any {
	iso := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	flips := []map[string]any{}
	for i, id := range comments[:4] {
		live, cand := "allow", "block"
		if i == 3 {
			live, cand = "block", "allow"
		}
		flips = append(flips, map[string]any{"kind": "comment", "id": id, "live": live, "candidate": cand,
			"liveConfidence": 0.91, "candidateConfidence": 0.77, "at": iso(at.Add(-time.Duration(i) * time.Minute))})
	}
	for _, id := range pitches[:2] {
		flips = append(flips, map[string]any{"kind": "pitch", "id": id, "live": "allow", "candidate": "block",
			"liveConfidence": 0.88, "candidateConfidence": 0.69, "at": iso(at.Add(-10 * time.Minute))})
	}
	points := []map[string]any{}
	for i := range 40 {
		live := 0.2 + float64(i)*0.017
		cand := live + 0.03
		if i%9 == 0 {
			cand = live + 0.15 // far off the diagonal
		}
		points = append(points, map[string]any{"songId": i + 1, "live": live, "candidate": min(cand, 1)})
	}
	movers := []map[string]any{}
	for i, m := range [][3]int{{3, 12, 4}, {7, 2, 9}, {11, 20, 14}, {5, 6, 10}, {9, 15, 12}, {1, 1, 3}} {
		movers = append(movers, map[string]any{"songId": m[0], "title": fmt.Sprintf("Song %c", 'A'+i), "liveRank": m[1],
			"candidateRank": m[2], "shift": m[1] - m[2]})
	}
	return map[string]any{
		"live":      map[string]any{"model": "critic", "api": "relay", "rubric": "art-v1"},
		"candidate": map[string]any{"model": "critic-2", "api": "relay", "rubric": "art-v2", "since": iso(at.Add(-2 * time.Hour))},
		"from":      iso(at.Add(-2 * time.Hour)), "to": iso(at),
		"calls": map[string]any{"today": 120, "dailyLimit": 1000, "owed": 4},
		"screens": map[string]any{
			"compared": 300, "agreement": 0.96,
			"byKind": []map[string]any{
				{"kind": "comment", "compared": 100, "table": map[string]any{"allow": map[string]int{"allow": 90, "block": 3}, "block": map[string]int{"allow": 1, "block": 6}}},
				{"kind": "pitch", "compared": 200, "table": map[string]any{"allow": map[string]int{"allow": 170, "block": 2}, "block": map[string]int{"allow": 0, "block": 28}}},
			},
			"flips": flips,
			"confidence": map[string]any{"bins": []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1},
				"live": []int{0, 0, 0, 0, 0, 1, 2, 5, 40, 52}, "candidate": []int{0, 0, 0, 0, 1, 2, 3, 10, 40, 44}},
		},
		"scores": map[string]any{"compared": 40, "meanDiff": 0.031, "spreadDiff": 0.044, "spearman": 0.93, "points": points, "movers": movers},
	}
}

// TestShadowPanelInChromium: the Shadow panel draws GET /api/admin/shadow — the candidate's
// members from the contract's fixture (two models that disagree on known items), the drift
// member from a real owed whose fake model held, then drifted — as pictures: a confusion
// matrix per kind with exact counts, the confidence histograms, the flips linked to their
// items' pages, the scatter, the rank shifts, the drift history with its red alert line and
// the drifted runs marked. Promote asks first (Esc cancels, nothing is sent); the anchor set
// is added to and deleted from through the form. axe finds nothing serious, light and dark,
// and at 360 px nothing is wider than the screen.
func TestShadowPanelInChromium(t *testing.T) {
	exe := chromiumPath(t)
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db")
	env.Quiet()
	ctx := context.Background()
	ok := func(r owedtest.Response, status int, what string) owedtest.Response {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
		return r
	}
	ada, _ := env.User("ada", models.RoleAuthor)
	song, rev, err := env.App.Store.CreateSong(ctx, ada, "Tide", `s("bd sd")`)
	if err != nil {
		t.Fatal(err)
	}
	var comments, pitches []int64
	for i := range 5 {
		c, err := env.App.Store.CreateComment(ctx, ada, song.ID, fmt.Sprintf("comment %d", i))
		if err != nil {
			t.Fatal(err)
		}
		p, err := env.App.Store.CreatePitch(ctx, ada, fmt.Sprintf("pitch %d", i))
		if err != nil {
			t.Fatal(err)
		}
		comments, pitches = append(comments, c.ID), append(pitches, p.ID)
	}
	// The anchor set: four pitches expected allowed, a revision with its reference art.
	for _, p := range pitches[:4] {
		ok(env.Do(http.MethodPost, "/api/admin/anchors", owedtest.AdminToken, map[string]any{"kind": "pitch", "itemId": p, "verdict": "allow"}), 201, "anchor")
	}
	ok(env.Do(http.MethodPost, "/api/admin/anchors", owedtest.AdminToken, map[string]any{"kind": "revision", "itemId": rev.ID, "art": 0.5}), 201, "anchor")
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
	fixture := shadowFixture(comments, pitches, env.Clock.Now())

	// The server: the real owed, with the candidate's members of GET /api/admin/shadow and its
	// promote and rollback answered from the fixture (the drift member stays the real one).
	var mu sync.Mutex
	posted := map[string]int{}
	app := env.App.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/admin/shadow":
			rec := httptest.NewRecorder()
			app.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				w.WriteHeader(rec.Code)
				w.Write(rec.Body.Bytes())
				return
			}
			var real map[string]json.RawMessage
			if err := json.Unmarshal(rec.Body.Bytes(), &real); err != nil {
				t.Errorf("shadow answer: %v", err)
			}
			out := map[string]any{"drift": real["drift"]}
			for k, v := range fixture {
				out[k] = v
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(out)
		case r.Method == http.MethodPost && (r.URL.Path == "/api/admin/shadow/promote" || r.URL.Path == "/api/admin/shadow/rollback"):
			mu.Lock()
			posted[r.URL.Path]++
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{}`))
		default:
			app.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	posts := func(path string) int {
		mu.Lock()
		defer mu.Unlock()
		return posted[path]
	}

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

	// The names and counts.
	b.waitText(t, "shadow-live", "critic · art-v1")
	b.waitText(t, "shadow-candidate", "critic-2 · art-v2")
	b.waitText(t, "shadow-calls", "120 / 1,000", "4 owed")
	b.waitText(t, "shadow-compared", "300 screens · 40 scores")
	b.waitExact(t, "shadow-agreement", "96.0%")
	// The confusion matrices, cell by cell.
	for cell, want := range map[string]string{
		"comment-allow-allow": "90", "comment-allow-block": "3", "comment-block-allow": "1", "comment-block-block": "6",
		"pitch-allow-allow": "170", "pitch-allow-block": "2", "pitch-block-allow": "0", "pitch-block-block": "28",
	} {
		if got := b.textOf(t, "shadow-cell-"+cell); got != want {
			t.Errorf("matrix cell %s reads %q, want %q", cell, got, want)
		}
	}
	// The histograms: a bar per model per bin; the scatter: a point per song, 5 off the diagonal.
	if n := eval[int](t, b, jsEl("shadow-confidence")+`.querySelectorAll('svg.sh-svg rect.sh-live, svg.sh-svg rect.sh-cand').length`); n != 20 {
		t.Errorf("%d histogram bars, want 20", n)
	}
	if n := eval[int](t, b, jsEl("shadow-scatter")+`.querySelectorAll('circle').length`); n != 40 {
		t.Errorf("%d scatter points, want 40", n)
	}
	if n := eval[int](t, b, jsEl("shadow-scatter")+`.querySelectorAll('circle.sh-pt-off').length`); n != 5 {
		t.Errorf("%d points marked off the diagonal, want 5", n)
	}
	b.waitText(t, "shadow-mover-3", "Song A", "12 → 4")
	if up, down := eval[int](t, b, jsEl("shadow-movers")+`.querySelectorAll('.sh-up').length`), eval[int](t, b, jsEl("shadow-movers")+`.querySelectorAll('.sh-down').length`); up != 3 || down != 3 {
		t.Errorf("rank shifts: %d up, %d down; want 3 and 3", up, down)
	}
	// The flips, each linked to its item's page.
	href := eval[string](t, b, jsEl(fmt.Sprintf("shadow-flip-comment-%d", comments[0]))+`.getAttribute('href')`)
	if href != fmt.Sprintf("/admin/items/comment/%d", comments[0]) {
		t.Errorf("a flip links to %q", href)
	}
	if n := eval[int](t, b, jsEl("shadow-flips")+`.querySelectorAll('tbody tr').length`); n != 6 {
		t.Errorf("%d flips listed, want 6", n)
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

	// Promote asks first; Esc sends nothing, the confirmation sends one.
	b.click(t, "shadow-promote")
	b.waitJS(t, "the confirmation focused", `document.activeElement === `+jsEl("shadow-promote-confirm-ok"))
	b.waitText(t, "shadow-promote-confirm", "critic-2 · art-v2", "art-v1")
	for _, v := range b.axeViolations(t) {
		t.Errorf("promote asking: %s", v)
	}
	b.key(t, kb.Escape)
	b.waitJS(t, "Esc cancels", `!`+jsEl("shadow-promote-confirm"))
	if n := posts("/api/admin/shadow/promote"); n != 0 {
		t.Fatalf("Esc sent %d promotions", n)
	}
	b.click(t, "shadow-promote")
	b.click(t, "shadow-promote-confirm-ok")
	b.waitJS(t, "the promotion sent", `!`+jsEl("shadow-promote-confirm"))
	if n := posts("/api/admin/shadow/promote"); n != 1 {
		t.Errorf("%d promotions sent, want 1", n)
	}
	b.click(t, "shadow-rollback")
	b.click(t, "shadow-rollback-confirm-ok")
	b.waitJS(t, "the rollback sent", `!`+jsEl("shadow-rollback-confirm"))
	if n := posts("/api/admin/shadow/rollback"); n != 1 {
		t.Errorf("%d rollbacks sent, want 1", n)
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

	for _, scheme := range []string{"light", "dark"} {
		if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
			t.Fatal(err)
		}
		for _, v := range b.axeViolations(t) {
			t.Errorf("shadow, %s: %s", scheme, v)
		}
	}
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}}); err != nil {
		t.Fatal(err)
	}
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
