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

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// testIncident walks an incident as an operator lives it (issue 24), asserting what the
// operator sees at each step: the model goes down (the tile says open, what happens next and
// the last error; health says degraded); screens are held (the tile says no probe will come);
// a test call during the hold finds the model still down; once it is back a test call closes
// the breaker; a job is found, decided with confirmation, and the verdict overturned; the hold
// is lifted; a retry runs now; a bulk retry during a hold says what it skipped; the Audit
// panel shows every action.
func testIncident(t *testing.T, w *world, b *browser) {
	ctx := context.Background()
	st := w.env.App.Store
	// The model goes down: the breaker opens (as ten failures in a row would).
	w.env.Model.Fail(503, nil)
	status := 503
	msg := "HTTP 503: fake failure"
	if _, ok, err := st.OpenBreaker(ctx, 10, models.WhyUpstream, &status, &msg, w.env.Clock.Now().Add(time.Minute)); err != nil || !ok {
		t.Fatalf("open the breaker: %v %v", ok, err)
	}
	b.tab(t, "overview")
	b.waitText(t, "model-state", "open")
	b.waitText(t, "model-next", "next probe in")
	b.waitText(t, "model-last-error", "HTTP 503")
	b.waitText(t, "stat-health", "degraded")
	if first := eval[string](t, b, `document.querySelector('[data-testid="overview-stats"]').firstElementChild.dataset.testid`); first != "stat-model" {
		t.Errorf("the first tile is %q, want the model's", first)
	}

	// Hold screens: the focus stays on the box; the tile says no job will probe.
	b.click(t, "hold-screen")
	b.waitText(t, "hold-banner", "On hold")
	b.waitJS(t, "the focus back on the hold box", `document.activeElement === `+jsEl("hold-screen"))
	b.waitText(t, "model-next", "no probes while screens are held", "test the model")
	b.waitJS(t, "held counted", `Number(`+jsEl("stat-jobs-held")+`.querySelector('.stat-value').textContent.replace(/,/g, '')) > 0`)
	if os.Getenv("OWED_SCREENSHOTS") != "" {
		b.shot(t, "incident-held")
	}
	b.waitJS(t, "held counted apart", `Number(`+jsEl("stat-jobs-held")+`.querySelector('.stat-value').textContent.replace(/,/g, '')) > 0`)

	// A test call during the hold: the model is still down.
	calls := w.env.Model.Calls()
	b.click(t, "model-probe")
	b.waitJS(t, "the probe's toast", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes('did not answer'))`)
	if w.env.Model.Calls() != calls+1 {
		t.Errorf("the test call made %d calls, want 1", w.env.Model.Calls()-calls)
	}
	b.waitText(t, "model-state", "open")

	// The model is back: a test call (5 s later) closes the breaker.
	w.env.Model.Reset()
	if _, err := st.RawExec(ctx, `UPDATE model_breaker SET manual_probe_at = NULL`); err != nil {
		t.Fatal(err)
	}
	b.click(t, "model-probe")
	b.waitText(t, "model-state", "closed")
	// Closed, but the screens are still held: the toast says none runs.
	b.waitJS(t, "the probe's toast", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes('the breaker is closed. Screens stay held: none runs'))`)
	b.waitJS(t, "the focus back on the probe button", `document.activeElement === `+jsEl("model-probe"))

	// Find a job and decide it by hand, confirmed; then overturn the verdict.
	var target map[string]any
	for _, j := range list(w.api(t, "/api/admin/jobs?task=screen&why=held")["jobs"]) {
		if num(obj(j)["id"]) != w.upstreamJob {
			target = obj(j)
			break
		}
	}
	if target == nil {
		t.Fatal("no held screen job to decide")
	}
	id := fmt.Sprint(num(target["id"]))
	b.do(t, "open the job", chromedp.Navigate(b.base+"/admin/jobs?job="+id))
	content := fmt.Sprint(obj(w.api(t, "/api/admin/jobs/"+id)["item"])["content"])
	if line, _, _ := strings.Cut(content, "\n"); len(line) > 30 {
		content = line[:30]
	} else {
		content = line
	}
	b.waitText(t, "job-detail-content", content)
	b.fill(t, "job-decide-note", "allowed during the incident")
	b.click(t, "job-decide-allow")
	b.click(t, "job-decide-confirm-ok")
	b.waitText(t, "job-decided", "Decided: allow", "admin", "allowed during the incident")
	if os.Getenv("OWED_SCREENSHOTS") != "" {
		b.shot(t, "incident-decided")
	}
	b.fill(t, "job-overturn-note", "spam after all")
	b.click(t, "job-overturn")
	b.waitJS(t, "the overturn's confirmation focused", `document.activeElement === `+jsEl("job-overturn-confirm-ok"))
	b.click(t, "job-overturn-confirm-ok")
	b.waitText(t, "job-decided", "Overturned to block", "spam after all")
	evs := list(w.api(t, fmt.Sprintf("/api/admin/events?outcome=overturned&itemId=%d&kind=%s", num(target["itemId"]), target["kind"]))["events"])
	if len(evs) != 1 || obj(evs[0])["verdict"] != "block" || obj(evs[0])["note"] != "spam after all" {
		t.Errorf("overturned events %v", evs)
	}
	b.click(t, "job-detail-close")

	// A bulk retry during the hold says what it skipped.
	b.choose(t, "jobs-filter-why", "held")
	b.waitJS(t, "the held jobs", `location.search.includes('why=held') && !!document.querySelector('[data-testid^="job-row-"]') && [...document.querySelectorAll('[data-testid^="job-row-"]')].every((r) => r.textContent.includes('held'))`)
	b.click(t, "jobs-bulk-retry")
	b.waitJS(t, "the confirmation open", jsVisible("jobs-bulk-confirm"))
	b.waitJS(t, "the confirmation focused", `document.activeElement === `+jsEl("jobs-bulk-confirm"))
	b.click(t, "jobs-bulk-confirm")
	b.waitJS(t, "the bulk toast", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => /0 jobs run now\. Skipped: [0-9,]+ held/.test(e.textContent))`)
	b.choose(t, "jobs-filter-why", "")

	// Bulk verdicts: two selected items blocked at once, confirmed.
	var picks []string
	for _, j := range list(w.api(t, "/api/admin/jobs?task=screen&why=held")["jobs"]) {
		if id := num(obj(j)["id"]); id != w.upstreamJob && len(picks) < 2 {
			picks = append(picks, fmt.Sprint(id))
		}
	}
	b.waitJS(t, "the filter cleared", `location.search === ''`)
	for _, id := range picks {
		b.waitJS(t, "the row", jsVisible("job-pick-"+id))
		for range 3 { // a live refresh may replace the row between the click and its render
			if eval[bool](t, b, jsEl("job-pick-"+id)+`.checked`) {
				break
			}
			b.click(t, "job-pick-"+id)
			_, _ = b.becomes(jsEl("job-pick-"+id)+`.checked`, time.Second) // not yet: the loop clicks again
		}
	}
	b.waitText(t, "jobs-picked-count", fmt.Sprintf("%d selected", len(picks)))
	b.click(t, "jobs-picked-block")
	b.waitJS(t, "the confirmation focused", `document.activeElement === `+jsEl("jobs-picked-confirm-ok"))
	b.click(t, "jobs-picked-confirm-ok")
	b.waitJS(t, "the bulk verdict toast", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes('Blocked `+fmt.Sprint(len(picks))+` items'))`)
	for _, id := range picks {
		if r := w.env.Do(http.MethodGet, "/api/admin/jobs/"+id, owedtest.AdminToken, nil); r.Status != http.StatusOK ||
			obj(r.JSON()["job"])["state"] != "done" || obj(r.JSON()["job"])["outcome"] != "decided" {
			t.Errorf("job %s after its item was blocked: %d %s, want settled (state done, outcome decided)", id, r.Status, r.Body)
		}
	}

	// Lift the hold; a retry runs now.
	w.ok(w.env.Do(http.MethodPut, "/api/admin/holds", owedtest.AdminToken, map[string]any{"screen": false}), http.StatusOK, "lift")
	b.do(t, "tell the banner", chromedp.Evaluate[chromedp.Void](`dispatchEvent(new CustomEvent('owed:holds', {detail: {screen: false, score: false, deliveries: false}}))`))
	up := fmt.Sprint(w.upstreamJob)
	b.waitJS(t, "the row", jsVisible("job-retry-"+up))
	b.click(t, "job-retry-"+up)
	b.waitJS(t, "the retry toast", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes('Job `+up+` runs now'))`)

	// The Audit panel shows who did what.
	b.tab(t, "audit")
	b.waitJS(t, "the audit table", jsVisible("audit-table"))
	text := eval[string](t, b, jsEl("audit-table")+`.textContent`)
	for _, a := range []string{"model.probe", "holds.set", "verdict.decide", "verdict.overturn", "job.retry"} {
		if !strings.Contains(text, a) {
			t.Errorf("the audit panel lacks %s", a)
		}
	}
}
