package frontend_test

// Browser tests: the admin SPA in Debian's Chromium, headless, against a real owed seeded with
// data for every panel (seed_test.go). With OWED_SCREENSHOTS=1 the test also writes the
// screenshots shown in the README to docs/screenshots/.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// chromiumPath finds Debian's chromium (or OWED_CHROMIUM). Without it the browser tests fail
// in CI (CI set) and are skipped, saying so, elsewhere: they never pass silently.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("OWED_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("OWED_CHROMIUM=%s: %v", p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const msg = "the admin SPA's browser tests need Chromium, which is not installed: " +
		"apt-get install -y chromium (or set OWED_CHROMIUM to a Chrome or Chromium binary)"
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPED: " + msg)
	return ""
}

// browser is one headless Chromium tab with a fresh profile.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu       sync.Mutex
	problems []string // uncaught exceptions, console errors, CSP violations
}

// dateShim makes the page's clock agree with the server's fake clock: offset ahead of the
// wall clock.
func dateShim(offset time.Duration) string {
	return fmt.Sprintf(`(() => {
  const offset = %d;
  const RealDate = Date;
  class ServerDate extends RealDate {
    constructor(...args) { if (args.length === 0) super(RealDate.now() + offset); else super(...args); }
    static now() { return RealDate.now() + offset; }
  }
  globalThis.Date = ServerDate;
})();`, offset.Milliseconds())
}

func newBrowser(t *testing.T, exe, base string, offset time.Duration) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.Flag("lang", "en-US"),
		chromedp.WindowSize(1280, 900),
	}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b := &browser{t: t, ctx: ctx, base: base}
	// The first action starts the browser, whose life is that of the context it runs with: the
	// tab's own, not a step's deadline.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium (%s): %v", exe, err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: dateShim(offset)}); err != nil {
		t.Fatalf("date shim: %v", err)
	}
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("log.enable: %v", err)
	}
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	console := chromedp.Events(ctx, runtime.ConsoleAPICalled)
	entries := chromedp.Events(ctx, cdplog.EntryAdded)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			msg := ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil && ev.ExceptionDetails.Exception.Description != "" {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
			b.problem("exception: " + msg)
		}
	}()
	go func() {
		for ev, err := range console {
			if err != nil {
				return
			}
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range ev.Args {
					if a.Description != "" {
						parts = append(parts, a.Description)
					} else {
						parts = append(parts, string(a.Value))
					}
				}
				b.problem("console.error: " + strings.Join(parts, " "))
			}
		}
	}()
	go func() {
		for ev, err := range entries {
			if err != nil {
				return
			}
			// A refused request (a 400 the test provokes) is logged by the network source;
			// everything else at error level (CSP violations among them) is a fault.
			if ev.Entry.Level == cdplog.EntryLevelError && ev.Entry.Source != cdplog.EntrySourceNetwork {
				b.problem(fmt.Sprintf("log %s: %s", ev.Entry.Source, ev.Entry.Text))
			}
		}
	}()
	return b
}

func (b *browser) problem(p string) {
	b.mu.Lock()
	b.problems = append(b.problems, p)
	b.mu.Unlock()
}

// checkProblems fails the test for every exception, console error or CSP violation so far.
func (b *browser) checkProblems() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("page: %s", p)
	}
	b.problems = nil
}

const step = 20 * time.Second

func (b *browser) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, b.snapshot())
	}
}

// eval runs a JavaScript expression and decodes its value into T.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until the expression is true: no fixed sleeps, a deadline.
func (b *browser) waitJS(t *testing.T, what, expr string) {
	t.Helper()
	start := time.Now()
	if ok, err := b.becomes(expr, step); !ok {
		t.Fatalf("waiting for %s: timed out (last error %v)\n%s", what, err, b.snapshot())
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("SLOW %s: %v", what, d)
	}
}

// becomes reports whether expr turns true within d, polling the page (with the last
// evaluation's error when it does not); for a step that may be retried (a click a re-render
// swallowed), timing out is not a failure.
func (b *browser) becomes(expr string, d time.Duration) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, err
		}
		time.Sleep(40 * time.Millisecond)
	}
}

// snapshot is the page's URL and visible text, for failure messages.
func (b *browser) snapshot() string {
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText : "")`))
	if err != nil {
		return "(no page text: " + err.Error() + ")"
	}
	if len(s) > 3000 {
		s = s[:3000] + "…"
	}
	return "page:\n" + s
}

// tid is a CSS selector for a data-testid.
func tid(id string) chromedp.CSS { return chromedp.CSS(`[data-testid="` + id + `"]`) }

// jsEl is a JavaScript expression for the element with a data-testid.
func jsEl(id string) string { return `document.querySelector('[data-testid="` + id + `"]')` }

// jsText is the element's text (trimmed, spaces collapsed), or "" when it is absent.
func jsText(id string) string {
	return `((e) => e ? e.textContent.replace(/\s+/g, ' ').trim() : '')(` + jsEl(id) + `)`
}

func jsVisible(id string) string {
	return `((e) => !!e && !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length))(` + jsEl(id) + `)`
}

func jsq(s string) string {
	j, _ := json.Marshal(s)
	return string(j)
}

// click clicks an element as a user does: it scrolls the element to the middle of the
// viewport, checks that the element is what a pointer there would hit (nothing covers it),
// and presses the mouse there.
func (b *browser) click(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(step)
	aim := `((e) => {
		if (!e || !(e.offsetWidth || e.offsetHeight)) return null;
		e.scrollIntoView({block: 'center', inline: 'nearest'});
		const r = e.getBoundingClientRect();
		const x = r.left + r.width / 2, y = r.top + r.height / 2;
		const hit = document.elementFromPoint(x, y);
		return hit && (hit === e || e.contains(hit)) ? [x, y] : null;
	})(` + jsEl(id) + `)`
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		pt, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](aim))
		if err == nil && len(pt) == 2 {
			err = chromedp.Do(ctx, chromedp.MouseClickXY(pt[0], pt[1]))
			cancel()
			if err != nil {
				t.Fatalf("click %s: %v", id, err)
			}
			return
		}
		cancel()
		if time.Now().After(deadline) {
			t.Fatalf("click %s: it never showed uncovered (last error %v)\n%s", id, err, b.snapshot())
		}
		time.Sleep(40 * time.Millisecond)
	}
}

// fill replaces an input's value by typing, as a user does.
func (b *browser) fill(t *testing.T, id, value string) {
	t.Helper()
	b.do(t, "fill "+id,
		chromedp.WaitVisible(tid(id)),
		chromedp.Evaluate[chromedp.Void](jsEl(id)+`.select()`),
		chromedp.Clear(tid(id)),
		chromedp.SendKeys(tid(id), value))
}

// choose picks an option of a select and fires change.
func (b *browser) choose(t *testing.T, id, value string) {
	t.Helper()
	b.do(t, "choose "+id, chromedp.WaitVisible(tid(id)), chromedp.Evaluate[chromedp.Void](
		`((e) => { e.value = `+jsq(value)+`; e.dispatchEvent(new Event('change', {bubbles: true})); })(`+jsEl(id)+`)`))
}

func (b *browser) tab(t *testing.T, id string) {
	t.Helper()
	b.click(t, "tab-"+id)
	b.waitJS(t, "panel "+id, jsVisible("panel-"+id)+` && location.pathname.startsWith('/admin/`+id+`')`)
}

func (b *browser) textOf(t *testing.T, id string) string {
	t.Helper()
	return eval[string](t, b, jsText(id))
}

// waitText waits until the element's text contains every part.
func (b *browser) waitText(t *testing.T, id string, parts ...string) {
	t.Helper()
	conds := make([]string, 0, len(parts))
	for _, p := range parts {
		conds = append(conds, jsText(id)+`.includes(`+jsq(p)+`)`)
	}
	if len(conds) == 0 {
		conds = append(conds, jsVisible(id))
	}
	b.waitJS(t, fmt.Sprintf("%s to show %q", id, parts), strings.Join(conds, " && "))
}

// waitExact waits until the element's text is exactly want.
func (b *browser) waitExact(t *testing.T, id, want string) {
	t.Helper()
	b.waitJS(t, fmt.Sprintf("%s to read %q (reads %q)", id, want, b.textOf(t, id)), jsText(id)+` === `+jsq(want))
}

// commas formats n as the SPA does (en-US thousands separators).
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// api reads an admin route of the seeded server as JSON.
func (w *world) api(t *testing.T, path string) map[string]any {
	t.Helper()
	r := w.env.Do(http.MethodGet, path, owedtest.AdminToken, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	return r.JSON()
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func list(v any) []any         { l, _ := v.([]any); return l }
func num(v any) int64          { f, _ := v.(float64); return int64(f) }

func TestAdminSPAInChromium(t *testing.T) {
	exe := chromiumPath(t)
	w := seedWorld(t)
	b := newBrowser(t, exe, w.env.Server.URL, w.offset)
	t.Cleanup(b.checkProblems)

	if !t.Run("sign in", func(t *testing.T) { testSignIn(t, w, b) }) {
		return
	}
	t.Run("overview", func(t *testing.T) { testOverview(t, w, b) })
	t.Run("jobs: filter, detail, retry", func(t *testing.T) { testJobs(t, w, b) })
	t.Run("backfill: start and pause", func(t *testing.T) { testBackfill(t, w, b) })
	t.Run("backfill: settings validation", func(t *testing.T) { testBackfillSettings(t, w, b) })
	t.Run("backfill: run order after Start all", func(t *testing.T) { testBackfillRunOrder(t, w, b) })
	t.Run("budgets: edit a limit", func(t *testing.T) { testBudgets(t, w, b) })
	t.Run("users: rotate a token, disable and enable", func(t *testing.T) { testUsers(t, w, b) })
	t.Run("events", func(t *testing.T) { testEvents(t, w, b) })
	t.Run("webhooks: deliveries and create", func(t *testing.T) { testWebhooks(t, w, b) })
	t.Run("console: errors, filters, find, decide", func(t *testing.T) { testConsoleJobs(t, w, b) })
	t.Run("console: holds", func(t *testing.T) { testConsoleHolds(t, w, b) })
	t.Run("console: typing in the events filter", func(t *testing.T) { testEventsFilterTyping(t, w, b) })
	t.Run("console: a truthful overview", func(t *testing.T) { testTruthfulOverview(t, w, b) })
	t.Run("incident: model down, hold, probe, decide, overturn, lift, retry", func(t *testing.T) { testIncident(t, w, b) })
	t.Run("accessibility: axe-core on every panel, light and dark", func(t *testing.T) { testAccessibility(t, w, b) })
	t.Run("layout: one row of tabs, 360 px", func(t *testing.T) { testLayout(t, w, b) })
	if os.Getenv("OWED_SCREENSHOTS") != "" {
		t.Run("screenshots", func(t *testing.T) { takeScreenshots(t, w, b) })
	}
}

func testSignIn(t *testing.T, w *world, b *browser) {
	b.do(t, "open /admin/", chromedp.Navigate(b.base+"/admin/"), chromedp.WaitVisible(tid("signin-token")))

	b.fill(t, "signin-token", "owed_not_a_token")
	b.click(t, "signin-submit")
	b.waitText(t, "signin-error", "not valid")

	b.fill(t, "signin-token", owedtest.AdminToken)
	b.click(t, "signin-submit")
	b.waitJS(t, "the console", jsVisible("tab-overview")+` && `+jsVisible("panel-overview"))
	if got := eval[string](t, b, `location.pathname`); got != "/admin/overview" {
		t.Errorf("after sign-in the page is %s, want /admin/overview", got)
	}
	// The session is an HttpOnly cookie: the page cannot read it.
	if c := eval[string](t, b, `document.cookie`); strings.Contains(c, "owed_session") {
		t.Errorf("the session cookie is readable from the page: %q", c)
	}
	tabs := eval[[]string](t, b, `[...document.querySelectorAll('[role=tab]')].map((e) => e.textContent.trim())`)
	want := []string{"Overview", "Content jobs", "Review", "Backfill", "Budgets", "Events", "Webhooks", "Audit", "Items", "Shadow"}
	if strings.Join(tabs, ",") != strings.Join(want, ",") {
		t.Errorf("tabs %q, want %q", tabs, want)
	}
}

func testOverview(t *testing.T, w *world, b *browser) {
	b.tab(t, "overview")
	st := w.api(t, "/api/admin/stats")
	jobs := obj(st["jobs"])
	bf := obj(st["backfill"])
	if num(jobs["total"]) == 0 || bf == nil {
		t.Fatalf("seeded stats look wrong: %v", st)
	}
	statValue := func(id, want string) {
		t.Helper()
		b.waitJS(t, fmt.Sprintf("%s to read %s", id, want), `((e) => e && e.textContent.trim() === `+jsq(want)+`)(document.querySelector('[data-testid="`+id+`"] .stat-value'))`)
	}
	statValue("stat-jobs-total", commas(num(jobs["total"])))
	statValue("stat-jobs-due", commas(num(jobs["due"])))
	statValue("stat-backfill-pending", commas(num(bf["pending"])))
	b.waitText(t, "stat-jobs-total", fmt.Sprintf("screen %s · score %s", commas(num(obj(jobs["byTask"])["screen"])), commas(num(obj(jobs["byTask"])["score"]))))
	b.waitText(t, "stat-backfill-pending", commas(num(bf["pending"])), "/min")
	b.waitText(t, "stat-health", "ok", "database")
	b.waitText(t, "retention", "keeps events 30d, deliveries 30d")
	// The schedule (robfig/cron): the sweep's period; this test's process runs no runners.
	b.waitText(t, "schedule", "cron: content sweep every 1m", "not running in this process")

	// The model's breaker as GET /api/admin/model has it, with the calls in flight out of the cap.
	model := w.api(t, "/api/admin/model")
	if model["state"] != "closed" || num(model["cap"]) != 16 {
		t.Errorf("the seeded model is %v, want closed with the default cap of 16", model)
	}
	b.waitText(t, "model-state", "closed")
	b.waitText(t, "model-inflight", fmt.Sprintf("%d of 16 model calls in flight here", num(model["inFlight"])))

	// The bars by why carry the real counts.
	for why, n := range obj(jobs["byWhy"]) {
		label := why
		if why == "none" {
			label = "ready"
		}
		b.waitJS(t, fmt.Sprintf("why %s = %v", why, n), `[...document.querySelectorAll('[data-testid="overview-why"] li')].some((li) =>
			li.querySelector('.bars-label').textContent.trim() === `+jsq(label)+` && li.querySelector('.bars-n').textContent.trim() === `+jsq(commas(num(n)))+`)`)
	}
	if num(obj(jobs["byWhy"])["upstream"]) != 3 || num(obj(jobs["byWhy"])["budget"]) != 2 {
		t.Errorf("byWhy = %v, want 3 upstream and 2 budget", jobs["byWhy"])
	}

	// The chart's legend sums the minutes the API answers.
	var screens, scores int64
	for _, m := range list(st["settled"]) {
		screens += num(obj(m)["screen"])
		scores += num(obj(m)["score"])
	}
	if screens < 40 || scores < 20 {
		t.Errorf("settled over the last hour: %d screens, %d scores; the seed made more", screens, scores)
	}
	b.waitText(t, "overview-settled", "screen "+commas(screens), "score "+commas(scores))
	bars := eval[int](t, b, `document.querySelectorAll('[data-testid="overview-settled"] rect.s-screen').length`)
	if bars < 10 {
		t.Errorf("the chart draws %d minutes with screens", bars)
	}

	// The backfill summary: the rate limit the seed left counts down; nothing runs.
	b.waitText(t, "overview-backfill", commas(num(bf["pending"])), "nothing")
	b.waitJS(t, "the rate-limit countdown", jsVisible("overview-limited")+` && /\d+:\d\d/.test(`+jsText("overview-limited")+`)`)
}

func testJobs(t *testing.T, w *world, b *browser) {
	b.tab(t, "jobs")
	up := fmt.Sprint(w.upstreamJob)
	b.waitText(t, "job-row-"+up, "upstream", "503", "waiting")
	b.waitText(t, "job-row-"+fmt.Sprint(w.budgetJob), "budget", "score")

	// Filter by why: the table holds exactly the API's upstream jobs, and the URL says so.
	want := list(w.api(t, "/api/admin/jobs?why=upstream")["jobs"])
	b.choose(t, "jobs-filter-why", "upstream")
	ids := make([]string, 0, len(want))
	for _, j := range want {
		ids = append(ids, fmt.Sprint(num(obj(j)["id"])))
	}
	b.waitJS(t, "only upstream jobs", `location.search === '?why=upstream' && (() => {
		const rows = [...document.querySelectorAll('[data-testid="jobs-table"] tbody tr')];
		return rows.map((r) => r.dataset.testid.replace('job-row-', '')).join(',') === `+jsq(strings.Join(ids, ","))+`
			&& rows.every((r) => r.textContent.includes('upstream'));
	})()`)

	// The detail shows the attempt history from the events.
	b.click(t, "job-detail-"+up)
	b.waitText(t, "job-detail", "Job "+up, "503", "upstream")
	b.waitText(t, "job-events", "pending", "503")
	b.click(t, "job-detail-close")
	b.waitJS(t, "the detail to close", `!`+jsEl("job-detail"))

	// Retry: the job becomes due now.
	b.click(t, "job-retry-"+up)
	b.waitText(t, "job-row-"+up, "due")
	j := obj(w.api(t, "/api/admin/jobs/"+up)["job"])
	due, err := time.Parse(time.RFC3339, j["dueAt"].(string))
	if err != nil || due.After(w.env.Clock.Now()) {
		t.Errorf("after retry the job is due at %v (now %v)", j["dueAt"], w.env.Clock.Now())
	}
	b.waitJS(t, "the retry toast", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes('Job `+up+` runs now'))`)
	b.choose(t, "jobs-filter-why", "")
	b.waitJS(t, "the filter cleared", `location.search === ''`)
}

// exec changes the seeded database behind the server's back (a state the seed cannot reach
// in a few steps).
func (w *world) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := w.env.App.Store.RawExec(context.Background(), q, args...); err != nil {
		t.Fatalf("exec %s: %v", q, err)
	}
}

// backfillJob is one chat's job in GET /api/backfill.
func (w *world) backfillJob(t *testing.T, chat string) map[string]any {
	t.Helper()
	for _, j := range list(w.api(t, "/api/backfill")["jobs"]) {
		if obj(j)["chatId"] == chat {
			return obj(j)
		}
	}
	t.Fatalf("no backfill job for %s", chat)
	return nil
}

func testBackfill(t *testing.T, w *world, b *browser) {
	b.tab(t, "backfill")
	st := w.api(t, "/api/backfill")
	tot := obj(st["totals"])
	b.waitText(t, "backfill-total-pending", commas(num(tot["pending"])))
	b.waitExact(t, "backfill-state-general", "done")
	b.waitExact(t, "backfill-state-memes", "paused")
	b.waitExact(t, "backfill-state-releases", "idle")
	b.waitExact(t, "backfill-state-archive-2019", "idle")

	// #general ran to the end with a measured rate; its members are listed with their counts.
	gen := w.backfillJob(t, "general")
	if gen["rateMeasured"] != true {
		t.Errorf("#general's rate is not measured: %v", gen)
	}
	b.waitText(t, "backfill-job-general", "measured", "100%", commas(num(gen["cached"])))
	// processed counts each row once as it settles: never more than the chat's rows.
	for _, j := range list(w.api(t, "/api/backfill")["jobs"]) {
		if j := obj(j); num(j["processed"]) > num(j["total"]) {
			t.Errorf("%v: processed %v of %v rows", j["chatId"], j["processed"], j["total"])
		}
	}
	b.waitExact(t, "backfill-processed-general", commas(num(gen["processed"])))
	// A rate that counts rate-limit waits says so (the seed's CDN gives one 429, which is not
	// counted: the run's row is given two waits here, as steady 429s leave it).
	if gen["waitedMs"] != 0.0 {
		t.Errorf("#general waitedMs = %v, want 0 (it had no 429)", gen["waitedMs"])
	}
	b.waitText(t, "backfill-rate-general", "measured")
	w.exec(t, `UPDATE backfill_jobs SET run_waits = 2, run_wait_ms = 42000 WHERE chat_id = 'general'`)
	b.waitText(t, "backfill-rate-general", "measured, waits included", "42s of rate-limit waits counted")
	if got := w.backfillJob(t, "general")["waitedMs"]; got != 42000.0 {
		t.Errorf("#general waitedMs = %v after two waits of 21 s, want 42000", got)
	}
	w.exec(t, `UPDATE backfill_jobs SET run_waits = 0, run_wait_ms = 0 WHERE chat_id = 'general'`)
	for _, m := range list(gen["members"]) {
		id := fmt.Sprint(num(obj(m)["scrapeId"]))
		b.waitText(t, "backfill-member-"+id, obj(m)["backend"].(string), obj(m)["mode"].(string), commas(num(obj(m)["total"])))
	}
	// #memes: its progress, pending by kind, and the rate limit counting down.
	memes := w.backfillJob(t, "memes")
	pk := obj(memes["pendingByKind"])
	if pk == nil {
		pk = map[string]any{}
		for _, m := range list(memes["members"]) {
			for k, v := range obj(obj(m)["pendingByKind"]) {
				pk[k] = float64(num(pk[k]) + num(v))
			}
		}
	}
	b.waitText(t, "backfill-job-memes", "gif "+commas(num(pk["gif"])), "image "+commas(num(pk["image"])))
	b.waitJS(t, "the memes progress bar", jsEl("backfill-progress-memes")+`.value > 0 && `+jsEl("backfill-progress-memes")+`.value < `+jsEl("backfill-progress-memes")+`.max`)
	b.waitJS(t, "the rate-limit countdown", jsVisible("backfill-countdown")+` && /^\d+:\d\d$/.test(`+jsText("backfill-countdown")+`)`)
	b.waitText(t, "backfill-walking", "walk")

	// Start #releases from the UI: next to run, its first batch held by the rate limit (never
	// "running" beside a start of now). Then pause it: paused.
	b.click(t, "backfill-start-releases")
	b.waitExact(t, "backfill-state-releases", "queued")
	b.waitExact(t, "backfill-position-releases", "next to run")
	b.waitExact(t, "backfill-started-releases", "waiting to run")
	b.waitJS(t, "releases to start in about the rate limit's wait", `/^about /.test(`+jsText("backfill-starts-releases")+`)`)
	if j := w.backfillJob(t, "releases"); j["state"] != "queued" || j["position"] != 0.0 || j["waitsFor"] != "rate-limit" {
		t.Errorf("after Start the API says #releases is %v at %v waiting for %v; want queued at 0 for the rate limit", j["state"], j["position"], j["waitsFor"])
	}
	b.waitJS(t, "Pause to be enabled", `!`+jsEl("backfill-pause-releases")+`.disabled`)
	b.click(t, "backfill-pause-releases")
	b.waitExact(t, "backfill-state-releases", "paused")
	if s := w.backfillJob(t, "releases")["state"]; s != "paused" {
		t.Errorf("after Pause the API says #releases is %v", s)
	}
}

// After "Start all" the cards follow the run order: the job next to run first, then the queue
// by position, then the rest; each says what its ETA waits for. The seed left a rate limit
// (15 min) and a walk (10 min) holding the queue, so the first job's first batch waits: it is
// queued at the head and starts when the wait ends, never "running" beside a start of now.
func testBackfillRunOrder(t *testing.T, w *world, b *browser) {
	b.tab(t, "backfill")
	b.waitJS(t, "Start all to be enabled", `!`+jsEl("backfill-start-all")+`.disabled`)
	b.click(t, "backfill-start-all")
	b.waitExact(t, "backfill-position-memes", "next to run")
	b.waitExact(t, "backfill-state-releases", "queued")
	b.waitExact(t, "backfill-state-archive-2019", "queued")

	// The API's run order: memes was started first (in the seed), so it is next; the others queue
	// in the order they were first started (releases, when an earlier subtest started it).
	queue := make([]string, 2)
	for _, j := range list(w.api(t, "/api/backfill")["jobs"]) {
		j := obj(j)
		chat := j["chatId"].(string)
		p, ok := j["position"].(float64)
		switch {
		case chat == "memes" && (!ok || p != 0):
			t.Errorf("memes has position %v, want 0", j["position"])
		case (chat == "releases" || chat == "archive-2019") && ok && p >= 1 && p <= 2:
			queue[int(p)-1] = chat
		case chat == "general" && ok:
			t.Errorf("general (done) has position %v, want null", p)
		case chat == "releases" || chat == "archive-2019":
			t.Errorf("%s has position %v, want 1 or 2", chat, j["position"])
		}
	}
	// Both from one status: the clock runs at the wall clock's pace, so two reads disagree by
	// the time between them.
	byChat := map[string]map[string]any{}
	for _, j := range list(w.api(t, "/api/backfill")["jobs"]) {
		byChat[obj(j)["chatId"].(string)] = obj(j)
	}
	memes := byChat["memes"]
	if memes["state"] != "queued" || num(memes["etaStartMs"]) <= 0 || memes["etaStartMs"] != memes["waitMs"] || memes["waitsFor"] != "rate-limit" {
		t.Errorf("memes: %v, etaStartMs %v, waitMs %v, waitsFor %v; want queued, starting when the rate limit's wait ends",
			memes["state"], memes["etaStartMs"], memes["waitMs"], memes["waitsFor"])
	}
	next := byChat[queue[0]]
	if num(next["etaStartMs"]) < num(memes["etaTotalMs"]) || num(next["waitMs"]) <= 0 {
		t.Errorf("%s starts in %v ms with a wait of %v ms; want after memes ends (%v ms), the wait included",
			queue[0], next["etaStartMs"], next["waitMs"], memes["etaTotalMs"])
	}

	cards := `[...document.querySelectorAll('[data-testid="backfill-jobs"] > article')].map((e) => e.dataset.testid.replace('backfill-job-', '')).join(',')`
	want := "memes," + queue[0] + "," + queue[1] + ",general"
	b.waitJS(t, "the cards in run order "+want+" (reads "+eval[string](t, b, cards)+")", cards+` === `+jsq(want))
	b.waitJS(t, "memes to start in about the wait", `/^about /.test(`+jsText("backfill-starts-memes")+`)`)
	b.waitText(t, "backfill-waits-memes", "the rate limit")
	// Nothing of the new runs has run yet (the rate limit and the walk hold the queue): no job
	// says it started; the queued ones say so, the one next to run that it waits to run.
	for _, chat := range append([]string{"memes"}, queue...) {
		if at := w.backfillJob(t, chat)["startedAt"]; at != nil {
			t.Errorf("%s has startedAt %v before its run's first batch; want null", chat, at)
		}
	}
	b.waitExact(t, "backfill-started-memes", "waiting to run")
	b.waitExact(t, "backfill-started-"+queue[0], "queued")
	b.waitExact(t, "backfill-started-"+queue[1], "queued")
	b.waitJS(t, "general's start as a time", jsEl("backfill-started-general")+`.querySelector('time') !== null`)
	b.waitText(t, "backfill-position-"+queue[0], "#1 in the queue")
	b.waitText(t, "backfill-waits-"+queue[0], "after chat memes", "the rate limit")
	b.waitText(t, "backfill-waits-"+queue[1], "after chat "+queue[0])
	b.waitText(t, "backfill-waits-general", "—")
	b.waitText(t, "backfill-walking", "live-room")
	if os.Getenv("OWED_SCREENSHOTS") != "" {
		b.do(t, "viewport", chromedp.EmulateViewport(1280, 860))
		b.shot(t, "backfill-run-order")
	}

	// Pausing the running job takes it out of the schedule: the queue moves up, and the paused
	// card goes after it (the API still lists memes first, by pending rows).
	b.click(t, "backfill-pause-memes")
	b.waitExact(t, "backfill-state-memes", "paused")
	want = queue[0] + "," + queue[1] + ",memes,general"
	b.waitJS(t, "the cards in run order "+want+" after the pause (reads "+eval[string](t, b, cards)+")", cards+` === `+jsq(want))
	b.waitText(t, "backfill-starts-memes", "not scheduled")
	b.waitText(t, "backfill-waits-memes", "paused jobs are not scheduled")
	if first := obj(list(w.api(t, "/api/backfill")["jobs"])[0])["chatId"]; first != "memes" {
		t.Logf("the API lists %v first; the check above is only meaningful while it lists memes first", first)
	}
	// Back as it was: everything paused, then Start all again, memes (first started) next.
	b.waitJS(t, "Pause all to be enabled", `!`+jsEl("backfill-pause-all")+`.disabled`)
	b.click(t, "backfill-pause-all")
	b.waitExact(t, "backfill-state-"+queue[0], "paused")
	b.waitJS(t, "Start all to be enabled", `!`+jsEl("backfill-start-all")+`.disabled`)
	b.click(t, "backfill-start-all")
	b.waitExact(t, "backfill-position-memes", "next to run")
}

func testBackfillSettings(t *testing.T, w *world, b *browser) {
	b.tab(t, "backfill")
	settings := func() map[string]any { return obj(w.api(t, "/api/backfill")["settings"]) }
	before := settings()

	for _, bad := range []string{"0", "501"} {
		b.fill(t, "settings-batchSize", bad)
		b.click(t, "settings-save")
		b.waitText(t, "settings-error", "Batch size must be a whole number from 1 to 500")
		b.waitJS(t, "batchSize marked invalid", jsEl("settings-batchSize")+`.getAttribute('aria-invalid') === 'true'`)
		if got := settings(); num(got["batchSize"]) != num(before["batchSize"]) {
			t.Errorf("batchSize %s reached the server: %v", bad, got)
		}
	}

	// The server's own validation message shows too.
	b.fill(t, "settings-batchSize", "50")
	b.waitJS(t, "the error to clear", `!`+jsEl("settings-error"))
	b.fill(t, "settings-batchPauseMs", "3600001")
	b.click(t, "settings-save")
	b.waitText(t, "settings-error", "batchPauseMs must be a whole number of ms from 0 to 3600000")
	b.waitJS(t, "batchPauseMs marked invalid", jsEl("settings-batchPauseMs")+`.getAttribute('aria-invalid') === 'true'`)

	b.fill(t, "settings-batchPauseMs", "1500")
	b.click(t, "settings-save")
	b.waitJS(t, "the saved toast", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes('Backfill settings saved'))`)
	b.waitJS(t, "no error", `!`+jsEl("settings-error"))
	if got := settings(); num(got["batchSize"]) != 50 || num(got["batchPauseMs"]) != 1500 {
		t.Errorf("saved settings = %v, want batchSize 50, batchPauseMs 1500", got)
	}
}

func testBudgets(t *testing.T, w *world, b *browser) {
	b.tab(t, "budgets")
	rows := map[int64]map[string]any{}
	for _, r := range list(w.api(t, "/api/admin/budgets")["budgets"]) {
		rows[num(obj(r)["userId"])] = obj(r)
	}
	for _, name := range []string{"ada", "bo", "cy", "dee"} {
		r := rows[w.users[name]]
		if r == nil {
			t.Fatalf("no budget row for %s", name)
		}
		b.waitText(t, fmt.Sprintf("budget-row-%d", w.users[name]), name, commas(num(r["spent"])), commas(num(r["limit"])))
	}
	bo := rows[w.users["bo"]]
	if num(bo["limit"]) != 4 || num(bo["spent"]) != 2 {
		t.Errorf("bo's budget = %v, want 2 of 4 spent", bo)
	}

	cy := fmt.Sprint(w.users["cy"])
	b.click(t, "budget-edit-"+cy)
	// The editor selects its field when it opens; type once it has.
	b.waitJS(t, "the limit field to take focus", `document.activeElement === `+jsEl("budget-limit-"+cy))
	b.fill(t, "budget-limit-"+cy, "-3")
	b.click(t, "budget-save-"+cy)
	b.waitText(t, "budget-error-"+cy, "whole number")
	b.fill(t, "budget-limit-"+cy, "250")
	b.click(t, "budget-save-"+cy)
	b.waitJS(t, "the editor to close", `!`+jsEl("budget-limit-"+cy))
	b.waitJS(t, "the focus back on its opener", `document.activeElement === `+jsEl("budget-edit-"+cy))
	b.waitText(t, "budget-row-"+cy, "250")
	// Esc closes the editor too, the focus back on its opener.
	b.click(t, "budget-edit-"+cy)
	b.waitJS(t, "the limit field to take focus", `document.activeElement === `+jsEl("budget-limit-"+cy))
	b.key(t, kb.Escape)
	b.waitJS(t, "Esc to close the editor", `!`+jsEl("budget-limit-"+cy)+` && document.activeElement === `+jsEl("budget-edit-"+cy))
	for _, r := range list(w.api(t, "/api/admin/budgets")["budgets"]) {
		if num(obj(r)["userId"]) == w.users["cy"] && num(obj(r)["limit"]) != 250 {
			t.Errorf("cy's limit after the edit: %v", r)
		}
	}
}

// testUsers: the Budgets panel's users table rotates a token in a modal dialog that takes focus,
// shows the new token once and gives focus back; Disable locks a user out and Enable lets
// them back in; the last enabled admin cannot be disabled.
func testUsers(t *testing.T, w *world, b *browser) {
	b.tab(t, "budgets")
	bot := fmt.Sprint(w.users["archiver"])
	b.waitText(t, "user-row-"+bot, "archiver", "bot", "enabled")
	old := w.toks["archiver"]

	b.click(t, "user-rotate-"+bot)
	b.waitJS(t, "the dialog to open modal", jsEl("rotate-dialog")+`.open && `+jsEl("rotate-dialog")+`.matches(':modal')`)
	b.waitJS(t, "the confirm button to take focus", `document.activeElement === `+jsEl("rotate-confirm"))
	if r := w.env.Do(http.MethodGet, "/api/scrapes", old, nil); r.Status != http.StatusOK {
		t.Fatalf("the bot's token before the rotation: %d", r.Status)
	}
	b.click(t, "rotate-confirm")
	b.waitText(t, "rotate-token", "owed_")
	b.waitJS(t, "the new token to take focus", `document.activeElement === `+jsEl("rotate-token"))
	fresh := strings.TrimSpace(b.textOf(t, "rotate-token"))
	if r := w.env.Do(http.MethodGet, "/api/scrapes", old, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("the old token after the rotation: %d, want 401", r.Status)
	}
	if r := w.env.Do(http.MethodGet, "/api/scrapes", fresh, nil); r.Status != http.StatusOK {
		t.Errorf("the token the dialog showed: %d, want 200", r.Status)
	}
	w.toks["archiver"] = fresh
	// Esc with the token shown warns before closing; Back returns to the token.
	b.key(t, kb.Escape)
	b.waitText(t, "rotate-leave", "Close without storing the token?")
	b.waitJS(t, "the dialog still open", jsEl("rotate-dialog")+`.open`)
	b.click(t, "rotate-leave-back")
	b.waitJS(t, "the warning gone", `!`+jsEl("rotate-leave"))
	b.click(t, "rotate-done")
	b.waitJS(t, "the dialog to close", `!`+jsEl("rotate-dialog"))
	b.waitJS(t, "focus back on the Rotate button", `document.activeElement === `+jsEl("user-rotate-"+bot))

	dee := fmt.Sprint(w.users["dee"])
	// Disable asks first (Esc cancels); the focus goes to the confirmation, then back.
	b.click(t, "user-toggle-"+dee)
	b.waitJS(t, "the confirmation focused", `document.activeElement === `+jsEl("user-disable-confirm-ok"))
	b.key(t, kb.Escape)
	b.waitJS(t, "Esc cancels", `!`+jsEl("user-disable-confirm")+` && document.activeElement === `+jsEl("user-toggle-"+dee))
	if r := w.env.Do(http.MethodGet, "/api/listeners/mine", w.toks["dee"], nil); r.Status != http.StatusOK {
		t.Errorf("a cancelled Disable disabled the user: %d", r.Status)
	}
	b.click(t, "user-toggle-"+dee)
	b.click(t, "user-disable-confirm-ok")
	b.waitText(t, "user-state-"+dee, "disabled")
	if r := w.env.Do(http.MethodGet, "/api/listeners/mine", w.toks["dee"], nil); r.Status != http.StatusUnauthorized {
		t.Errorf("a disabled user's token: %d, want 401", r.Status)
	}
	b.waitText(t, "user-toggle-"+dee, "Enable")
	b.click(t, "user-toggle-"+dee)
	b.waitText(t, "user-state-"+dee, "enabled")
	if r := w.env.Do(http.MethodGet, "/api/listeners/mine", w.toks["dee"], nil); r.Status != http.StatusOK {
		t.Errorf("an enabled user's token: %d, want 200", r.Status)
	}

	var admin string
	for _, u := range list(w.api(t, "/api/admin/users")["users"]) {
		if obj(u)["role"] == "admin" {
			admin = fmt.Sprint(num(obj(u)["id"]))
		}
	}
	b.click(t, "user-toggle-"+admin)
	b.click(t, "user-disable-confirm-ok")
	b.waitJS(t, "the last-admin refusal", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes('last enabled admin'))`)
	b.waitText(t, "user-state-"+admin, "enabled")
}

func testEvents(t *testing.T, w *world, b *browser) {
	b.tab(t, "events")
	evs := list(w.api(t, "/api/admin/events?limit=50")["events"])
	if len(evs) != 50 {
		t.Fatalf("the seed made %d events, want a full page", len(evs))
	}
	first := obj(evs[0])
	// Newest first, the page the API answers.
	b.waitJS(t, "the newest events", `(() => {
		const rows = [...document.querySelectorAll('[data-testid="events-table"] tbody tr')];
		return rows.length === 50 && rows[0].dataset.testid === 'event-row-`+fmt.Sprint(num(first["id"]))+`';
	})()`)
	b.waitText(t, "event-row-"+fmt.Sprint(num(first["id"])), first["event"].(string), first["outcome"].(string))
	for _, e := range evs {
		if e := obj(e); e["why"] == "upstream" {
			b.waitText(t, "event-row-"+fmt.Sprint(num(e["id"])), "upstream", "503")
			break
		}
	}
	b.do(t, "filter blocks", chromedp.Evaluate[chromedp.Void](`((e) => { e.value = 'block'; e.dispatchEvent(new Event('change', {bubbles: true})); })(document.getElementById('ef-outcome'))`))
	blocks := list(w.api(t, "/api/admin/events?outcome=block")["events"])
	if len(blocks) == 0 {
		t.Fatal("the seed made no block")
	}
	b.waitJS(t, "only blocks", `(() => {
		const rows = [...document.querySelectorAll('[data-testid="events-table"] tbody tr')];
		return rows.length === `+fmt.Sprint(len(blocks))+` && rows.every((r) => r.textContent.includes('block'));
	})()`)
	b.waitJS(t, "the URL to carry the filter", `location.search === '?outcome=block'`)
	b.do(t, "clear the filter", chromedp.Evaluate[chromedp.Void](`((e) => { e.value = ''; e.dispatchEvent(new Event('change', {bubbles: true})); })(document.getElementById('ef-outcome'))`))
}

func testWebhooks(t *testing.T, w *world, b *browser) {
	b.tab(t, "webhooks")
	screens, dead := fmt.Sprint(w.hooks["screens"]), fmt.Sprint(w.hooks["dead"])
	b.waitText(t, "webhook-row-"+fmt.Sprint(w.hooks["all"]), "/all", "*", "active")
	b.waitText(t, "webhook-row-"+screens, "/screens", "item.screened", "active")
	b.waitExact(t, "webhook-state-"+dead, "disabled")

	// The deliveries of /screens, each with its attempts: find one that failed before it
	// went through.
	ds := list(w.api(t, "/api/admin/webhooks/"+screens+"/deliveries?limit=20")["deliveries"])
	var retried map[string]any
	for _, d := range ds {
		if d := obj(d); d["status"] == "delivered" && num(d["attempts"]) == 3 {
			retried = d
			break
		}
	}
	if retried == nil {
		t.Fatalf("no delivery of /screens among the newest took three attempts: %d deliveries", len(ds))
	}
	id := fmt.Sprint(num(retried["id"]))
	b.click(t, "webhook-deliveries-"+screens)
	b.waitText(t, "delivery-row-"+id, "item.screened", "delivered", "3")
	b.click(t, "delivery-attempts-"+id)
	b.waitJS(t, "the attempts of delivery "+id, `(() => {
		const t = `+jsEl("delivery-attempts-table-"+id)+`;
		if (!t) return false;
		const rows = [...t.querySelectorAll(':scope > tbody > tr')].map((r) => r.textContent);
		return rows.length === 3 && rows.some((r) => r.includes('503')) && rows.some((r) => r.includes('500')) && rows.some((r) => r.includes('204'));
	})()`)
	b.waitText(t, "delivery-payload-"+id, `"type": "item.screened"`)

	// Twenty at a time, older ones on request.
	countRows := `document.querySelectorAll('[data-testid="webhook-deliveries-list-` + screens + `"] [data-testid^="delivery-row-"]').length`
	b.waitJS(t, "a page of deliveries", countRows+` === 20`)
	b.click(t, "delivery-older-"+screens)
	b.waitJS(t, "two pages of deliveries", countRows+` === 40`)

	// The dead receiver's deliveries were cancelled when it was disabled, with the error.
	dd := list(w.api(t, "/api/admin/webhooks/"+dead+"/deliveries")["deliveries"])
	if len(dd) == 0 || obj(dd[0])["status"] != "cancelled" {
		t.Fatalf("deliveries of the dead webhook: %v", dd)
	}
	did := fmt.Sprint(num(obj(dd[0])["id"]))
	b.click(t, "webhook-deliveries-"+dead)
	b.waitText(t, "delivery-row-"+did, "cancelled", "connection refused")

	// The form offers every event a subscription may name, in the store's order.
	offered := eval[[]string](t, b, `[...document.querySelectorAll('[data-testid^="webhook-event-"]')].map((e) => e.dataset.testid.slice('webhook-event-'.length))`)
	if strings.Join(offered, ",") != strings.Join(models.WebhookEvents, ",") {
		t.Errorf("the form offers events %q, want %q", offered, models.WebhookEvents)
	}

	// Create a webhook: its secret shows once.
	b.fill(t, "webhook-url", w.receiver.URL+"/new")
	b.click(t, "webhook-event-song.scored")
	b.click(t, "webhook-create")
	b.waitJS(t, "the secret", `/^whsec_[A-Za-z0-9+/]{32}$/.test(`+jsText("webhook-secret")+`)`)
	secret := b.textOf(t, "webhook-secret")
	r := w.env.Do(http.MethodGet, "/api/admin/webhooks", owedtest.AdminToken, nil)
	if strings.Contains(string(r.Body), secret) {
		t.Error("the API shows the secret again")
	}
	var created map[string]any
	for _, h := range list(r.JSON()["webhooks"]) {
		if obj(h)["url"] == w.receiver.URL+"/new" {
			created = obj(h)
		}
	}
	if created == nil || fmt.Sprint(created["events"]) != "[item.screened song.scored]" {
		t.Fatalf("created webhook = %v", created)
	}
	b.waitText(t, fmt.Sprintf("webhook-row-%d", num(created["id"])), "/new", "song.scored")
	b.click(t, "webhook-secret-done")
	b.waitJS(t, "the secret to go", `!`+jsEl("webhook-secret"))
	b.do(t, "reload", chromedp.Reload())
	b.waitText(t, fmt.Sprintf("webhook-row-%d", num(created["id"])), "/new")
	if strings.Contains(b.snapshot(), secret) {
		t.Error("the secret shows again after a reload")
	}
}

// shot writes docs/screenshots/NAME.png of the page as it is painted now.
func (b *browser) shot(t *testing.T, name string) {
	t.Helper()
	dir := filepath.Join("..", "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b.do(t, "settle", chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('.toast').forEach((e) => e.remove()); window.scrollTo(0, 0); document.activeElement && document.activeElement.blur()`))
	// Wait for fonts and two frames, so the picture is of a painted page.
	b.waitJS(t, "a painted page", `document.fonts.status === 'loaded'`)
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote docs/screenshots/%s.png (%d KiB)", name, len(png)/1024)
}

// takeScreenshots writes docs/screenshots/*.png: every panel in light mode at 1280 px, and the
// backfill panel in dark mode and 360 px wide.
func takeScreenshots(t *testing.T, w *world, b *browser) {
	// A livelier queue: #memes resumed (it waits out the rate limit), #releases queued.
	for _, chat := range []string{"memes"} {
		w.ok(w.env.Do(http.MethodPost, "/api/backfill/start", owedtest.AdminToken, map[string]string{"chatId": chat}), http.StatusOK, "start "+chat)
	}

	shot := func(name string) { t.Helper(); b.shot(t, name) }
	viewport := func(width, height int64, mobile bool) {
		t.Helper()
		var opts []chromedp.EmulateViewportOption
		if mobile {
			opts = append(opts, chromedp.EmulateMobile)
		}
		b.do(t, "viewport", chromedp.EmulateViewport(width, height, opts...))
	}
	viewport(1280, 860, false)

	b.tab(t, "overview")
	b.waitJS(t, "the overview", jsVisible("overview-settled"))
	shot("overview")

	b.tab(t, "jobs")
	b.click(t, "job-detail-"+fmt.Sprint(w.upstreamJob))
	b.waitText(t, "job-events", "HTTP 503: fake failure")
	b.waitText(t, "job-decide")
	shot("jobs")
	b.click(t, "job-detail-close")

	// A hold on screens: the banner on every panel, the held jobs.
	b.tab(t, "overview")
	b.click(t, "hold-screen")
	b.waitText(t, "hold-banner", "screens")
	b.waitJS(t, "the overview", jsVisible("overview-settled"))
	shot("holds")
	b.click(t, "hold-lift")
	b.click(t, "hold-lift-confirm-ok")
	b.waitJS(t, "the banner gone", `!`+jsEl("hold-banner"))

	b.tab(t, "backfill")
	b.waitExact(t, "backfill-position-memes", "next to run")
	shot("backfill")

	b.tab(t, "budgets")
	b.waitText(t, fmt.Sprintf("budget-row-%d", w.users["bo"]), "bo")
	shot("budgets")

	b.tab(t, "events")
	b.waitJS(t, "events", jsVisible("events-table"))
	shot("events")

	b.tab(t, "webhooks")
	screens := fmt.Sprint(w.hooks["screens"])
	b.waitText(t, "webhook-row-"+screens, "/screens")
	if !eval[bool](t, b, jsVisible("webhook-deliveries-list-"+screens)) {
		b.click(t, "webhook-deliveries-"+screens)
	}
	for _, d := range list(w.api(t, "/api/admin/webhooks/"+screens+"/deliveries?limit=20")["deliveries"]) {
		if d := obj(d); num(d["attempts"]) == 3 {
			b.click(t, fmt.Sprintf("delivery-attempts-%d", num(d["id"])))
			b.waitText(t, fmt.Sprintf("delivery-attempts-table-%d", num(d["id"])), "503")
			break
		}
	}
	shot("webhooks")

	// Dark mode, as the system asks for it.
	b.colorScheme(t, "dark")
	b.tab(t, "backfill")
	shot("backfill-dark")
	b.colorScheme(t, "light")

	// A phone, 360 px wide.
	viewport(360, 780, true)
	b.tab(t, "backfill")
	shot("backfill-360")
	b.do(t, "jobs", chromedp.Navigate(b.base+"/admin/jobs")) // its tab is in the More menu at this width
	b.waitJS(t, "the jobs", jsVisible("jobs-table"))
	shot("jobs-360")
	viewport(1280, 860, false)
}

// resourceCount is how many requests the page made whose URL contains part (the Resource
// Timing entries), so a test can wait for the next live refresh without a fixed sleep.
func resourceCount(part string) string {
	return `performance.getEntriesByType('resource').filter((e) => e.name.includes(` + jsq(part) + `)).length`
}

// key sends one key (kb.Enter, kb.Escape, kb.Tab) to whatever has the focus.
func (b *browser) key(t *testing.T, k string) {
	t.Helper()
	b.do(t, "key", chromedp.KeyEvent(k))
}

// testConsoleJobs: the operators' console on the jobs panel (issue 14): each attempt's error,
// filters that a live refresh never overwrites and that apply on Enter and on blur, the total,
// sorting, a deep link to a job, the detail closed by Esc with the focus back on its opener, a
// retry that the budget refuses, and a verdict by hand.
func testConsoleJobs(t *testing.T, w *world, b *browser) {
	b.tab(t, "jobs")
	if n := eval[int](t, b, `document.querySelectorAll('h1').length`); n != 1 {
		t.Errorf("%d h1 elements, want one", n)
	}
	up := fmt.Sprint(w.upstreamJob)
	// Errors kept: the row shows the last attempt's error in words.
	b.waitText(t, "job-row-"+up, "HTTP 503: fake failure")
	unanswered := obj(list(w.api(t, "/api/admin/jobs?why=unanswered")["jobs"])[0])
	uid := fmt.Sprint(num(unanswered["id"]))
	b.waitText(t, "job-row-"+uid, "answer is not JSON")
	// The item column is the item's title, a link to the job.
	b.waitText(t, "job-item-"+uid, "new sample pack out")

	// The total that matches.
	total := num(w.api(t, "/api/admin/jobs")["total"])
	b.waitText(t, "jobs-count", commas(total)+" matching")

	// Typing in a filter survives the live refresh; Enter applies it.
	b.fill(t, "jobs-filter-author", "ad")
	before := eval[int](t, b, resourceCount("/api/admin/jobs?"))
	b.waitJS(t, "a live refresh while typing", resourceCount("/api/admin/jobs?")+` > `+fmt.Sprint(before)+` + 1`)
	if v := eval[string](t, b, jsEl("jobs-filter-author")+`.value`); v != "ad" {
		t.Errorf("the live refresh left the author field as %q, want what was typed", v)
	}
	if s := eval[string](t, b, `location.search`); strings.Contains(s, "author") {
		t.Errorf("the filter applied before Enter: %s", s)
	}
	b.key(t, kb.Enter)
	adaJobs := w.api(t, "/api/admin/jobs?author=ad")
	b.waitJS(t, "the author filter", `location.search === '?author=ad' && `+jsText("jobs-count")+`.startsWith(`+jsq(commas(num(adaJobs["total"]))+" matching")+`)`)
	b.waitJS(t, "only ada's jobs", `[...document.querySelectorAll('[data-testid="jobs-table"] tbody tr')].every((r) => r.textContent.includes('ada'))`)
	// Blur applies too: the item id, then a click elsewhere.
	b.fill(t, "jobs-filter-item", fmt.Sprint(num(unanswered["itemId"])))
	b.click(t, "jobs-filter-id")
	b.waitJS(t, "the item filter on blur", `location.search.includes('itemId=`+fmt.Sprint(num(unanswered["itemId"]))+`')`)
	b.click(t, "jobs-filter-author")
	b.do(t, "clear the author", chromedp.Evaluate[chromedp.Void](jsEl("jobs-filter-author")+`.select()`), chromedp.KeyEvent(kb.Backspace), chromedp.KeyEvent(kb.Enter))
	b.waitJS(t, "the unanswered job alone", `location.search === '?itemId=`+fmt.Sprint(num(unanswered["itemId"]))+`' && !!`+jsEl("job-row-"+uid))
	b.click(t, "jobs-filter-item")
	b.do(t, "clear the item", chromedp.Evaluate[chromedp.Void](jsEl("jobs-filter-item")+`.select()`), chromedp.KeyEvent(kb.Backspace), chromedp.KeyEvent(kb.Tab))
	b.waitJS(t, "no filter", `location.search === ''`)

	// Sorted by attempts: the first row has the most.
	b.choose(t, "jobs-sort", "attempts")
	most := obj(list(w.api(t, "/api/admin/jobs?sort=attempts&limit=1")["jobs"])[0])
	b.waitJS(t, "most attempts first", `location.search === '?sort=attempts' && ((r) => r && r.dataset.testid === 'job-row-`+fmt.Sprint(num(most["id"]))+`')(document.querySelector('[data-testid="jobs-table"] tbody tr'))`)
	b.choose(t, "jobs-sort", "")

	// The detail: opened from its button, closed by Esc, the focus back on the button.
	b.click(t, "job-detail-"+up)
	b.waitText(t, "job-detail-error", "HTTP 503: fake failure")
	b.waitJS(t, "the deep link in the URL", `location.search === '?job=`+up+`'`)
	b.key(t, kb.Escape)
	b.waitJS(t, "the detail to close", `!`+jsEl("job-detail"))
	b.waitJS(t, "the focus back on the opener", `document.activeElement && document.activeElement.dataset.testid === 'job-detail-`+up+`'`)

	// A retry the budget cannot cover: refused with the reason, no attempt spent.
	bj := fmt.Sprint(w.budgetJob)
	attempts := num(obj(w.api(t, "/api/admin/jobs/"+bj)["job"])["attempts"])
	b.click(t, "job-retry-"+bj)
	b.waitJS(t, "the refusal toast", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes('Job `+bj+` was not retried') && e.textContent.includes('budget'))`)
	if got := num(obj(w.api(t, "/api/admin/jobs/"+bj)["job"])["attempts"]); got != attempts {
		t.Errorf("a refused retry moved attempts %d → %d", attempts, got)
	}

	// A deep link as #/jobs/123 opens the job, with its item and author.
	b.do(t, "open the deep link", chromedp.Navigate(b.base+"/admin/#/jobs/"+uid))
	b.waitText(t, "job-detail-item", "new sample pack out")
	b.waitText(t, "job-detail-author", "cy")
	b.waitJS(t, "the link rewritten", `location.pathname === '/admin/jobs' && location.search === '?job=`+uid+`'`)
	b.waitText(t, "job-events", "answer is not JSON")

	// Decide by hand: the garbage-answered pitch is blocked with a note; the job is settled.
	// The item's whole content is shown; the verdict asks for confirmation (Esc cancels), then
	// shows what was decided, by whom, with the note.
	b.waitText(t, "job-detail-content", "new sample pack out")
	b.fill(t, "job-decide-note", "spam, decided by hand")
	b.click(t, "job-decide-block")
	b.waitJS(t, "the confirmation focused", `document.activeElement === `+jsEl("job-decide-confirm-ok"))
	b.key(t, kb.Escape)
	b.waitJS(t, "Esc cancels the confirmation", `!`+jsEl("job-decide-confirm")+` && !!`+jsEl("job-detail"))
	if n := len(list(w.api(t, fmt.Sprintf("/api/admin/events?outcome=decided&itemId=%d", num(unanswered["itemId"])))["events"])); n != 0 {
		t.Errorf("a cancelled verdict was recorded")
	}
	b.click(t, "job-decide-block")
	b.click(t, "job-decide-confirm-ok")
	b.waitText(t, "job-decided", "Decided: block", "admin", "spam, decided by hand")
	b.waitJS(t, "the row gone", `!`+jsEl("job-row-"+uid))
	evs := list(w.api(t, fmt.Sprintf("/api/admin/events?outcome=decided&itemId=%d", num(unanswered["itemId"])))["events"])
	if len(evs) != 1 || obj(evs[0])["note"] != "spam, decided by hand" || obj(evs[0])["verdict"] != "block" {
		t.Errorf("decided events = %v", evs)
	}
	b.click(t, "job-detail-close")
	b.waitJS(t, "the detail closed", `!`+jsEl("job-detail")+` && location.search === ''`)
}

// testConsoleHolds: holding screens from the overview shows the banner on every panel and the
// jobs held; its button lifts the hold.
func testConsoleHolds(t *testing.T, w *world, b *browser) {
	b.tab(t, "overview")
	b.click(t, "hold-screen")
	b.waitText(t, "hold-banner", "On hold", "screens")
	if h := w.api(t, "/api/admin/holds"); h["screen"] != true || h["score"] != false || h["deliveries"] != false {
		t.Errorf("holds = %v, want screens held", h)
	}
	b.tab(t, "jobs")
	b.waitText(t, "hold-banner", "screens")
	b.choose(t, "jobs-filter-why", "held")
	held := w.api(t, "/api/admin/jobs?why=held")
	if num(held["total"]) == 0 {
		t.Fatalf("no job shows why held: %v", held)
	}
	b.waitJS(t, "the held jobs", jsText("jobs-count")+`.startsWith(`+jsq(commas(num(held["total"]))+" matching")+`) && [...document.querySelectorAll('[data-testid="jobs-table"] tbody tr')].every((r) => r.textContent.includes('held') && r.textContent.includes('screen'))`)
	b.click(t, "hold-lift")
	b.click(t, "hold-lift-confirm-ok")
	b.waitJS(t, "the banner gone", `!`+jsEl("hold-banner"))
	if h := w.api(t, "/api/admin/holds"); h["screen"] != false {
		t.Errorf("holds after the lift = %v", h)
	}
	b.waitJS(t, "no job held", jsText("jobs-count")+`.startsWith('0 matching')`)
	b.choose(t, "jobs-filter-why", "")
	b.waitJS(t, "the filter cleared", `location.search === ''`)
}

// testTruthfulOverview: each series of the settled chart on its own scale (the tallest bar of
// each reaches at least half its height), the backfill card naming what it waits for, the walk
// banner naming the chat, and webhooks failing as the API says.
func testTruthfulOverview(t *testing.T, w *world, b *browser) {
	b.tab(t, "overview")
	for _, k := range []string{"screen", "score", "pending"} {
		b.waitJS(t, "the "+k+" series on its own scale", `((s) => s && Math.max(0, ...[...s.querySelectorAll('rect:not(.hit)')].map((r) => Number(r.getAttribute('height')))) >= 20)(`+jsEl("overview-series-"+k)+`)`)
	}
	bf := obj(w.api(t, "/api/admin/stats")["backfill"])
	if bf["limitedUntil"] == nil || bf["walkingChat"] != "live-room" {
		t.Fatalf("seeded backfill summary = %v, want a rate limit and the walk of live-room", bf)
	}
	b.waitText(t, "overview-waits", "the rate limit")

	b.tab(t, "backfill")
	b.waitExact(t, "backfill-walking-chat", "live-room")

	// A receiver that refuses every connection: its webhook is failing, with the error.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/hook"
	l.Close()
	hook := w.ok(w.env.Do(http.MethodPost, "/api/admin/webhooks", owedtest.AdminToken, map[string]any{"url": refused, "events": []string{"item.screened"}}),
		http.StatusCreated, "the refused webhook").JSON()
	hookID := fmt.Sprint(num(obj(hook["webhook"])["id"]))
	pitch := num(obj(w.post("ada", "/api/listeners/pitches", map[string]string{"body": "one for the failing hook"})["pitch"])["id"])
	w.ok(w.env.Do(http.MethodPost, fmt.Sprintf("/api/admin/items/pitch/%d/verdict", pitch), owedtest.AdminToken, map[string]any{"verdict": "allow"}),
		http.StatusOK, "decide the pitch")
	w.deliver()
	if h := func() map[string]any {
		for _, h := range list(w.api(t, "/api/admin/webhooks")["webhooks"]) {
			if fmt.Sprint(num(obj(h)["id"])) == hookID {
				return obj(h)
			}
		}
		return nil
	}(); h == nil || h["failing"] != true {
		t.Fatalf("the refused webhook = %v, want failing", h)
	}

	b.tab(t, "webhooks")
	b.waitText(t, "webhook-error-"+hookID, "connection refused")
	for _, h := range list(w.api(t, "/api/admin/webhooks")["webhooks"]) {
		h := obj(h)
		id := fmt.Sprint(num(h["id"]))
		switch {
		case h["active"] == true && h["failing"] == true:
			b.waitExact(t, "webhook-state-"+id, "failing")
			if e, _ := h["lastError"].(string); e != "" {
				b.waitText(t, "webhook-error-"+id, e)
			}
		case h["active"] == true:
			b.waitExact(t, "webhook-state-"+id, "active")
		default:
			b.waitExact(t, "webhook-state-"+id, "disabled")
		}
	}
}

// axeViolations runs axe-core (vendored under testdata/axe) on the page and answers its
// serious and critical violations, one line each: rule, impact, what it is, and where.
func (b *browser) axeViolations(t *testing.T) []string {
	t.Helper()
	if !eval[bool](t, b, `typeof window.axe === 'object'`) {
		src, err := os.ReadFile(filepath.Join("testdata", "axe", "axe.min.js"))
		if err != nil {
			t.Fatal(err)
		}
		b.do(t, "load axe-core", chromedp.Evaluate[chromedp.Void](string(src)))
	}
	// A toast fading in or out has, for that moment, the contrast of its blend with the page:
	// axe measures the page at rest.
	b.waitJS(t, "toasts at rest", `[...document.querySelectorAll('.toast')].every((el) =>
		!el.classList.contains('toast-out') && el.getAnimations().every((a) => a.playState !== 'running'))`)
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`axe.run(document, {resultTypes: ['violations']}).then((r) =>
		r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').flatMap((v) =>
			v.nodes.slice(0, 5).map((n) => v.id + ' (' + v.impact + '): ' + v.help + ' — ' + n.target.join(' ') + ' — ' + (n.failureSummary || '').replace(/\s+/g, ' ').slice(0, 200))))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe: %v", err)
	}
	return out
}

// colorScheme has the page prefer scheme: "light" or "dark".
func (b *browser) colorScheme(t *testing.T, scheme string) {
	t.Helper()
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
		t.Fatal(err)
	}
}

// axeInBothSchemes fails the test for each serious or critical violation axe-core finds on the
// page as it is, in light and in dark mode (naming it what), and leaves the page light.
func (b *browser) axeInBothSchemes(t *testing.T, what string) {
	t.Helper()
	for _, scheme := range []string{"light", "dark"} {
		b.colorScheme(t, scheme)
		for _, v := range b.axeViolations(t) {
			t.Errorf("%s, %s: %s", what, scheme, v)
		}
	}
	b.colorScheme(t, "light")
}

// testAccessibility: axe-core finds no serious or critical violation on any panel, in light
// and dark mode.
func testAccessibility(t *testing.T, w *world, b *browser) {
	panels := []struct{ id, ready string }{
		{"overview", "overview-settled"}, {"jobs", "jobs-table"}, {"backfill", "backfill-state-memes"},
		{"budgets", fmt.Sprintf("budget-row-%d", w.users["bo"])}, {"events", "events-table"}, {"webhooks", "webhook-row-" + fmt.Sprint(w.hooks["all"])},
		{"audit", "audit-table"},
	}
	for _, scheme := range []string{"light", "dark"} {
		b.colorScheme(t, scheme)
		for _, p := range panels {
			b.tab(t, p.id)
			b.waitJS(t, p.id+" loaded", jsVisible(p.ready))
			for _, v := range b.axeViolations(t) {
				t.Errorf("%s, %s: %s", p.id, scheme, v)
			}
		}
		// A job's detail (with the verdict by hand) and the hold banner.
		b.tab(t, "jobs")
		b.click(t, "job-detail-"+fmt.Sprint(w.upstreamJob))
		b.waitText(t, "job-decide")
		w.ok(w.env.Do(http.MethodPut, "/api/admin/holds", owedtest.AdminToken, map[string]any{"deliveries": true}), http.StatusOK, "hold deliveries")
		b.do(t, "tell the banner", chromedp.Evaluate[chromedp.Void](`dispatchEvent(new CustomEvent('owed:holds', {detail: {screen: false, score: false, deliveries: true}}))`))
		b.waitText(t, "hold-banner", "webhook deliveries")
		for _, v := range b.axeViolations(t) {
			t.Errorf("job detail and hold banner, %s: %s", scheme, v)
		}
		b.click(t, "hold-lift")
		b.click(t, "hold-lift-confirm-ok")
		b.waitJS(t, "the banner gone", `!`+jsEl("hold-banner"))
		b.click(t, "job-detail-close")
	}
	b.colorScheme(t, "light")
}

// testLayout: the header is one row of tabs, the ones that do not fit in a "More" menu (Esc
// closes it, the focus back on its button; a choice opens the panel); at 360 px the jobs keep
// their key columns on screen.
func testLayout(t *testing.T, w *world, b *browser) {
	b.do(t, "desktop", chromedp.EmulateViewport(1280, 860))
	b.tab(t, "jobs")
	if eval[bool](t, b, jsVisible("tabs-more")) {
		t.Errorf("at 1280 px seven tabs need no More menu")
	}
	// At 1280 px the job table does not overflow: errors wrap, each row's Retry is on screen.
	b.waitJS(t, "the jobs table", jsVisible("jobs-table"))
	if over := eval[int](t, b, `(() => { const w = document.querySelector('[data-testid="jobs-table"]').closest('.table-wrap'); return w.scrollWidth - w.clientWidth; })()`); over > 1 {
		t.Errorf("at 1280 px the job table overflows by %d px", over)
	}
	if !eval[bool](t, b, `[...document.querySelectorAll('[data-testid^="job-retry-"]')].every((e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.right <= innerWidth; })`) {
		t.Errorf("at 1280 px a Retry button is cut off")
	}
	b.do(t, "a phone", chromedp.EmulateViewport(360, 780, chromedp.EmulateMobile))
	defer b.do(t, "desktop again", chromedp.EmulateViewport(1280, 860))
	b.waitJS(t, "the More menu", jsVisible("tabs-more"))
	oneRow := `(() => {
		const rs = [...document.querySelectorAll('[role=tab]:not([hidden]), [data-testid="tabs-more"]')].map((e) => e.getBoundingClientRect());
		return rs.length > 2 && rs.every((r) => Math.abs(r.top - rs[0].top) < r.height / 2);
	})()`
	b.waitJS(t, "the tabs in one row", oneRow)
	if !eval[bool](t, b, jsVisible("tab-jobs")) {
		t.Errorf("the active panel's tab is not shown")
	}
	b.click(t, "tabs-more")
	b.waitJS(t, "the menu open, its first item focused", jsVisible("tabs-more-menu")+` && document.activeElement && document.activeElement.getAttribute('role') === 'menuitem'`)
	b.key(t, kb.Escape)
	b.waitJS(t, "Esc to close the menu", `!`+jsEl("tabs-more-menu")+` && document.activeElement === `+jsEl("tabs-more"))
	b.click(t, "tabs-more")
	b.click(t, "menu-webhooks")
	b.waitJS(t, "the webhooks panel", jsVisible("panel-webhooks")+` && `+jsVisible("tab-webhooks")+` && location.pathname === '/admin/webhooks'`)
	b.waitJS(t, "still one row", oneRow)

	// The jobs at 360 px: each row's id, item, why with its error, next attempt and actions
	// are on screen, no sideways scrolling.
	b.do(t, "jobs", chromedp.Navigate(b.base+"/admin/jobs"))
	up := fmt.Sprint(w.upstreamJob)
	b.waitJS(t, "the upstream job", jsVisible("job-row-"+up))
	onScreen := func(sel string) string {
		return `((e) => { if (!e) return false; const r = e.getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= innerWidth; })(document.querySelector(` + jsq(sel) + `))`
	}
	for _, sel := range []string{
		`[data-testid="job-row-` + up + `"] .c-id`, `[data-testid="job-item-` + up + `"]`, `[data-testid="job-row-` + up + `"] .c-why`,
		`[data-testid="job-row-` + up + `"] .c-next`, `[data-testid="job-detail-` + up + `"]`, `[data-testid="job-retry-` + up + `"]`,
	} {
		if !eval[bool](t, b, onScreen(sel)) {
			t.Errorf("at 360 px %s is off screen", sel)
		}
	}
	if w := eval[int](t, b, `document.documentElement.scrollWidth`); w > 360 {
		t.Errorf("the page is %d px wide at 360 px", w)
	}
	// A job's attempts are cards at 360 px: each attempt's error is on screen, first.
	b.click(t, "job-detail-"+up)
	b.waitJS(t, "the attempts", jsVisible("job-events"))
	if !eval[bool](t, b, onScreen(`[data-testid="job-events"] tbody tr .c-err`)) {
		t.Errorf("at 360 px an attempt's error is off screen")
	}
	if !eval[bool](t, b, `(() => { const c = document.querySelector('[data-testid="job-events"] tbody tr .c-err'); const top = c.getBoundingClientRect().top; return [...c.parentElement.children].every((d) => d === c || d.getBoundingClientRect().top >= top); })()`) {
		t.Errorf("at 360 px an attempt's error is not first")
	}
	b.click(t, "job-detail-close")
}

// testEventsFilterTyping: the Events panel's text filters survive its live refresh and apply
// on Enter.
func testEventsFilterTyping(t *testing.T, w *world, b *browser) {
	b.tab(t, "events")
	b.waitJS(t, "events", jsVisible("events-table"))
	id := fmt.Sprint(w.users["cy"])
	b.fill(t, "events-filter-user", id)
	before := eval[int](t, b, resourceCount("/api/admin/events?"))
	b.waitJS(t, "a live refresh while typing", resourceCount("/api/admin/events?")+` > `+fmt.Sprint(before))
	if v := eval[string](t, b, jsEl("events-filter-user")+`.value`); v != id {
		t.Errorf("the live refresh left the author field as %q, want %q", v, id)
	}
	b.key(t, kb.Enter)
	b.waitJS(t, "the author filter", `location.search === '?userId=`+id+`' && [...document.querySelectorAll('[data-testid="events-table"] tbody tr')].every((r) => r.textContent.includes('cy'))`)
	b.click(t, "events-filter-user")
	b.do(t, "clear", chromedp.Evaluate[chromedp.Void](jsEl("events-filter-user")+`.select()`), chromedp.KeyEvent(kb.Backspace), chromedp.KeyEvent(kb.Enter))
	b.waitJS(t, "no filter", `location.search === ''`)

	// By the author's name, in any case; an event links to its item's page.
	b.fill(t, "events-filter-user", "CY")
	b.key(t, kb.Enter)
	b.waitJS(t, "the author filter by name", `location.search === '?userId=`+id+`'`)
	b.waitJS(t, "cy's events", `!!document.querySelector('[data-testid^="event-item-"]') && [...document.querySelectorAll('[data-testid="events-table"] tbody tr')].every((r) => r.textContent.includes('cy'))`)
	first := eval[string](t, b, `document.querySelector('[data-testid^="event-item-"]').dataset.testid`)
	item := eval[string](t, b, jsEl(first)+`.textContent.trim()`)
	b.click(t, first)
	b.waitJS(t, "the event's item's page", `/^\/admin\/items\/[a-z]+\/`+item+`$/.test(location.pathname) && `+jsVisible("item-page"))
	b.waitText(t, "item-author", "cy")
	b.tab(t, "events")
	b.click(t, "events-filter-user")
	b.do(t, "clear", chromedp.Evaluate[chromedp.Void](jsEl("events-filter-user")+`.select()`), chromedp.KeyEvent(kb.Backspace), chromedp.KeyEvent(kb.Enter))
	b.waitJS(t, "no filter", `location.search === ''`)
}
