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

// cellsFit is JavaScript answering, for the table with the given test id, what does not fit:
// the panel or the table's scroller wider than its box, a cell whose content (its text and
// elements, down to any that clip their own) reaches past the cell's edges, and two cells of a
// row whose boxes overlap. Empty when everything fits.
func cellsFit(table string) string {
	return `(() => {
	const bad = [];
	const t = ` + jsEl(table) + `;
	if (!t) return ['no table ` + table + `'];
	const panel = t.closest('.panel');
	if (panel.scrollWidth > panel.clientWidth + 1) bad.push('the panel overflows: ' + panel.scrollWidth + ' > ' + panel.clientWidth);
	const wrap = t.closest('.table-wrap');
	if (wrap && wrap.scrollWidth > wrap.clientWidth + 1) bad.push('the table overflows its box: ' + wrap.scrollWidth + ' > ' + wrap.clientWidth);
	if (document.documentElement.scrollWidth > innerWidth) bad.push('the page is ' + document.documentElement.scrollWidth + ' px wide');
	const extent = (td) => {
		let left = Infinity, right = -Infinity;
		const walk = (n) => {
			for (const c of n.childNodes) {
				if (c.nodeType === 3) {
					if (!c.textContent.trim()) continue;
					const r = document.createRange();
					r.selectNodeContents(c);
					for (const q of r.getClientRects()) { left = Math.min(left, q.left); right = Math.max(right, q.right); }
				} else if (c.nodeType === 1) {
					const r = c.getBoundingClientRect();
					if (!r.width) continue;
					left = Math.min(left, r.left); right = Math.max(right, r.right);
					if (getComputedStyle(c).overflowX === 'visible') walk(c);
				}
			}
		};
		walk(td);
		return [left, right];
	};
	t.querySelectorAll('tbody tr').forEach((tr, i) => {
		const cells = [...tr.children].filter((td) => td.getBoundingClientRect().width > 0);
		cells.forEach((td, j) => {
			const box = td.getBoundingClientRect();
			const [left, right] = extent(td);
			if (left < box.left - 1 || right > box.right + 1) bad.push('row ' + i + ' cell ' + j + ' (' + td.textContent.trim().slice(0, 30) + '): content ' + Math.round(left) + '–' + Math.round(right) + ' outside ' + Math.round(box.left) + '–' + Math.round(box.right));
			for (const other of cells.slice(j + 1)) {
				const o = other.getBoundingClientRect();
				const w = Math.min(box.right, o.right) - Math.max(box.left, o.left), h = Math.min(box.bottom, o.bottom) - Math.max(box.top, o.top);
				if (w > 1 && h > 1) bad.push('row ' + i + ': cells ' + j + ' and ' + cells.indexOf(other) + ' overlap');
			}
		});
	});
	return bad.slice(0, 12);
})()`
}

// TestJobsAndAuditLayoutInChromium: at 1280 px and at 360 px, with long titles, author names,
// errors and audit values, neither Content jobs nor Audit is wider than its panel, no cell's
// content runs into its neighbour (the Item column into Author), and no two cells overlap;
// toasts cover neither the Overview's chart nor a job's attempts, wherever they are scrolled.
func TestJobsAndAuditLayoutInChromium(t *testing.T) {
	exe := chromiumPath(t)
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db", func(c *app.Config) { c.WebhooksAllowPrivate = true })
	ok := func(r owedtest.Response, status int, what string) owedtest.Response {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
		return r
	}
	_, long := env.User("Maximiliana Featherstonehaugh-Worthington", models.RoleAuthor)
	_, short := env.User("bo", models.RoleAuthor)
	env.Model.Fail(503, nil)
	var firstSong int64
	for i, title := range []string{
		"The Extraordinarily Long Title of a Song That Goes On and On Past the Bridge",
		"Northbound", "Quiet Engines of the Salt Lines at Dusk, a Suite in Four Parts",
	} {
		tok := long
		if i == 1 {
			tok = short
		}
		r := ok(env.Do(http.MethodPost, "/api/listeners/songs", tok, map[string]string{"title": title, "code": `s("bd*4 sd")`}), 201, "song").JSON()
		if i == 0 {
			firstSong = num(obj(r["revision"])["id"])
		}
		ok(env.Do(http.MethodPost, "/api/listeners/pitches", tok, map[string]string{"body": strings.Repeat("a remix contest with a very long opening line ", 4)}), 201, "pitch")
	}
	// The audit trail: holds, a verdict and an overturn with long notes, a webhook with a long URL.
	ok(env.Do(http.MethodPut, "/api/admin/holds", owedtest.AdminToken, map[string]any{"screen": true, "deliveries": true}), 200, "hold")
	ok(env.Do(http.MethodPut, "/api/admin/holds", owedtest.AdminToken, map[string]any{"screen": false, "deliveries": false}), 200, "lift")
	note := strings.Repeat("the hats on the bridge carry a link to a spam site ", 6)
	item := fmt.Sprintf("/api/admin/items/revision/%d/verdict", firstSong)
	ok(env.Do(http.MethodPost, item, owedtest.AdminToken, map[string]any{"verdict": "block", "note": note}), 200, "decide")
	ok(env.Do(http.MethodPost, item, owedtest.AdminToken, map[string]any{"verdict": "allow", "note": "no link after all: " + strings.Repeat("x", 120), "overturn": true}), 200, "overturn")
	ok(env.Do(http.MethodPost, "/api/admin/webhooks", owedtest.AdminToken, map[string]any{
		"url": "http://127.0.0.1:9/hooks/owed/a-very-long-path/that/keeps/going/for-the-receiving-service-of-the-label", "events": []string{"item.screened", "song.scored", "model.breaker"}}), 201, "webhook")

	b := newBrowser(t, exe, env.Server.URL, time.Until(env.Clock.Now()))
	t.Cleanup(b.checkProblems)
	b.do(t, "open /admin/jobs", chromedp.Navigate(b.base+"/admin/jobs"), chromedp.WaitVisible(tid("signin-token")))
	b.fill(t, "signin-token", owedtest.AdminToken)
	b.click(t, "signin-submit")
	for _, v := range []struct {
		width, height int64
		mobile        bool
	}{{1280, 860, false}, {360, 780, true}} {
		var opts []chromedp.EmulateViewportOption
		if v.mobile {
			opts = append(opts, chromedp.EmulateMobile)
		}
		b.do(t, "viewport", chromedp.EmulateViewport(v.width, v.height, opts...))
		for _, p := range []struct{ path, table, ready string }{
			{"/admin/jobs", "jobs-table", "Featherstonehaugh"},
			{"/admin/audit", "audit-table", "webhook.create"},
		} {
			b.do(t, "open "+p.path, chromedp.Navigate(b.base+p.path))
			b.waitJS(t, p.table, jsVisible(p.table)+` && `+jsText(p.table)+`.includes(`+jsq(p.ready)+`)`)
			if v.width > 640 {
				// The widest content is at its widest on one line: the test is not passed by wrapping alone.
				if n := eval[int](t, b, `document.querySelectorAll('[data-testid="`+p.table+`"] tbody tr').length`); n < 4 {
					t.Fatalf("%s: %d rows, want at least 4", p.table, n)
				}
			}
			for _, bad := range eval[[]string](t, b, cellsFit(p.table)) {
				t.Errorf("%s at %d px: %s", p.path, v.width, bad)
			}
		}
	}
	b.do(t, "desktop", chromedp.EmulateViewport(1280, 860))

	// Toasts cover neither the chart nor a job's attempts.
	clear := func(what, id string) {
		t.Helper()
		b.waitJS(t, "a toast", `!!document.querySelector('[data-testid="toast"]')`)
		// Wherever the page is scrolled to show it (its end at the screen's bottom, or centred).
		for _, at := range []string{"end", "center"} {
			if hit := eval[bool](t, b, `((e) => {
				e.scrollIntoView({block: '`+at+`'});
				return [...document.querySelectorAll('[data-testid="toast"]')].some((x) => {
					const a = x.getBoundingClientRect(), r = e.getBoundingClientRect();
					return Math.min(a.right, r.right) > Math.max(a.left, r.left) && Math.min(a.bottom, r.bottom, innerHeight) > Math.max(a.top, r.top, 0);
				});
			})(`+jsEl(id)+`)`); hit {
				t.Errorf("a toast covers %s (scrolled to its %s)", what, at)
			}
		}
		b.do(t, "dismiss", chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('.toast').forEach((e) => e.remove())`))
	}
	b.do(t, "the overview", chromedp.Navigate(b.base+"/admin/overview"))
	b.waitJS(t, "the chart", jsVisible("overview-settled"))
	b.click(t, "model-probe")
	clear("the chart", "overview-settled")
	jobs := list(ok(env.Do(http.MethodGet, "/api/admin/jobs?task=screen", owedtest.AdminToken, nil), 200, "jobs").JSON()["jobs"])
	b.do(t, "a job", chromedp.Navigate(fmt.Sprintf("%s/admin/jobs?job=%d", b.base, num(obj(jobs[0])["id"]))))
	b.waitText(t, "job-events", "HTTP 503")
	b.click(t, "job-detail-retry")
	clear("the attempts", "job-events")
}
