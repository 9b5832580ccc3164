package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// An incident as an operator lives it (issue 24): the model goes down, the breaker opens and
// health says degraded with the last error; the jobs put off say why breaker (not failed),
// keeping their own error; with screens held they count as held, not due, a held job's retry
// is 409 held, and a bulk retry says what it skipped; a test call during the hold finds the
// model still down (charged to nobody), a second within 5 s is 429; once the model is back a
// test call closes the breaker; every action is in the audit trail.
func TestIncidentModelDownHoldProbeRetry(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, func(c *app.Config) { c.ModelBreaker, c.ModelConcurrency = 3, 4 })
		env := w.env
		env.Model.Fail(503, nil)
		var pitches []int64
		for i := range 6 {
			r := w.do(http.MethodPost, "/api/listeners/pitches", asAuthor, map[string]string{"body": fmt.Sprintf("incident %d", i)})
			if r.Status != http.StatusCreated {
				t.Fatalf("write: %d %s", r.Status, r.Body)
			}
			pitches = append(pitches, num(obj(r.JSON()["pitch"])["id"]))
		}
		calls := env.Model.Calls()
		if calls != 3 {
			t.Fatalf("%d model calls, want the 3 that opened the breaker", calls)
		}

		// Health follows the breaker, with its last error.
		stats := w.do(http.MethodGet, "/api/admin/stats", asAdmin, nil).JSON()
		if h := fmt.Sprint(obj(stats["health"])["model"]); !strings.HasPrefix(h, "degraded: the breaker is open") || !strings.Contains(h, "503") {
			t.Errorf("health.model = %q, want degraded with the last error", h)
		}
		if r := w.do(http.MethodGet, "/readyz", asAnon, nil); r.Status != 200 || !strings.Contains(fmt.Sprint(r.JSON()["model"]), "degraded") {
			t.Errorf("/readyz: %d %s, want ready with the model degraded", r.Status, r.Body)
		}
		m := w.do(http.MethodGet, "/api/admin/model", asAdmin, nil).JSON()
		if m["state"] != "open" || !strings.Contains(fmt.Sprint(m["lastError"]), "503") || m["why"] != "upstream" || m["screensHeld"] != false {
			t.Errorf("model = %v, want open with its last error", m)
		}

		// Deferred is not failed: the three never sent say why breaker, with no error of their
		// own; the three tried wait their own backoff as upstream, with their real error.
		listed := w.do(http.MethodGet, "/api/admin/jobs?why=breaker", asAdmin, nil).JSON()
		if num(listed["total"]) != 3 {
			t.Errorf("why=breaker selects %d jobs, want the 3 never sent", num(listed["total"]))
		}
		for _, j := range list(listed["jobs"]) {
			if j := obj(j); j["why"] != "breaker" || num(j["attempts"]) != 0 || j["lastError"] != nil || j["status"] != nil {
				t.Errorf("a job put off by the breaker: %v", j)
			}
		}
		upstream := w.do(http.MethodGet, "/api/admin/jobs?why=upstream", asAdmin, nil).JSON()
		for _, j := range list(upstream["jobs"]) {
			if j := obj(j); num(j["attempts"]) != 1 || !strings.Contains(fmt.Sprint(j["lastError"]), "503") {
				t.Errorf("a tried job: %v, want its real error", j)
			}
		}
		if num(upstream["total"]) != 3 {
			t.Errorf("why=upstream selects %d, want the 3 tried", num(upstream["total"]))
		}
		if by := obj(obj(stats["jobs"])["byWhy"]); num(by["breaker"]) != 3 || num(by["upstream"]) != 3 {
			t.Errorf("stats byWhy = %v, want 3 breaker, 3 upstream", by)
		}
		mine := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()
		for _, it := range list(mine["items"]) {
			for _, j := range list(obj(it)["jobs"]) {
				if j := obj(j); num(j["attempts"]) == 0 && j["why"] != "breaker" {
					t.Errorf("mine shows a put-off job as %v, want breaker", j["why"])
				}
			}
		}

		// Hold screens: held is not due; the tile knows no job will probe.
		if r := w.do(http.MethodPut, "/api/admin/holds", asAdmin, map[string]any{"screen": true}); r.Status != 200 {
			t.Fatalf("hold: %d %s", r.Status, r.Body)
		}
		env.Clock.Advance(10 * time.Second) // past the probe: held work is due by time, not by claim
		jobs := obj(w.do(http.MethodGet, "/api/admin/stats", asAdmin, nil).JSON()["jobs"])
		if num(jobs["held"]) != 6 || num(jobs["due"]) != 0 || num(obj(jobs["byWhy"])["held"]) != 6 {
			t.Errorf("stats jobs during the hold = %v, want 6 held, 0 due", jobs)
		}
		// The held keep their split: what they would show once lifted.
		if by := obj(jobs["heldByWhy"]); num(by["breaker"]) != 3 || num(by["upstream"]) != 3 {
			t.Errorf("stats heldByWhy during the hold = %v, want 3 breaker, 3 upstream", by)
		}
		if m := w.do(http.MethodGet, "/api/admin/model", asAdmin, nil).JSON(); m["screensHeld"] != true {
			t.Errorf("model during the hold: %v, want screensHeld", m)
		}
		held := w.job(models.TaskScreen, models.KindPitch, pitches[0])
		before := w.snapshot()
		r := w.do(http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/retry", held.ID), asAdmin, nil)
		checkError(t, r, http.StatusConflict, "held", "")
		w.unchanged(t, before, "retrying a held job")
		r = w.do(http.MethodPost, "/api/admin/jobs/retry", asAdmin, map[string]any{})
		if strings.TrimSpace(string(r.Body)) != `{"retried":0,"skipped":{"budget":0,"held":6}}` {
			t.Errorf("bulk retry during the hold: %s, want 6 skipped as held", r.Body)
		}

		// A test call during the hold: the model is still down. Charged to nobody.
		spent := num(obj(w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()["budget"])["spent"])
		r = w.do(http.MethodPost, "/api/admin/model/probe", asAdmin, nil)
		if r.Status != 200 {
			t.Fatalf("probe: %d %s", r.Status, r.Body)
		}
		p := r.JSON()
		if p["state"] != "open" || obj(p["probe"])["answered"] != false || obj(p["probe"])["closed"] != false {
			t.Errorf("probe while the model is down = %s", r.Body)
		}
		if env.Model.Calls() != calls+1 {
			t.Errorf("the probe made %d calls, want 1", env.Model.Calls()-calls)
		}
		env.Clock.Advance(2 * time.Second) // of the 5 s between probes
		r = w.do(http.MethodPost, "/api/admin/model/probe", asAdmin, nil)
		checkError(t, r, http.StatusTooManyRequests, "rate_limited", "")
		if got := r.Header.Get("Retry-After"); got != "3" {
			t.Errorf("429 with Retry-After %q, want the 3 s left", got)
		}

		// The model is back: a test call closes the breaker, during the hold.
		env.Model.Reset()
		env.Clock.Advance(5 * time.Second)
		r = w.do(http.MethodPost, "/api/admin/model/probe", asAdmin, nil)
		if p := r.JSON(); r.Status != 200 || p["state"] != "closed" || obj(p["probe"])["answered"] != true || obj(p["probe"])["closed"] != true {
			t.Fatalf("probe once the model is back: %d %s", r.Status, r.Body)
		}
		if now := num(obj(w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()["budget"])["spent"]); now != spent {
			t.Errorf("the probes charged the author: spent %d → %d", spent, now)
		}
		if h := fmt.Sprint(obj(w.do(http.MethodGet, "/api/admin/stats", asAdmin, nil).JSON()["health"])["model"]); h != "ok" {
			t.Errorf("health.model after the close = %q", h)
		}

		// Lift the hold, retry now.
		w.do(http.MethodPut, "/api/admin/holds", asAdmin, map[string]any{"screen": false})
		r = w.do(http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/retry", held.ID), asAdmin, nil)
		if r.Status != 200 {
			t.Errorf("retry after the lift: %d %s", r.Status, r.Body)
		}

		// The trail: probes, holds and the retry, newest first, each with its admin.
		a := w.do(http.MethodGet, "/api/admin/audit?limit=5", asAdmin, nil).JSON()
		var actions []string
		for _, e := range list(a["entries"]) {
			e := obj(e)
			actions = append(actions, fmt.Sprint(e["action"]))
			if e["adminName"] != "admin" || num(e["adminId"]) != w.uid[asAdmin] {
				t.Errorf("entry %v: not by the admin", e)
			}
		}
		want := "job.retry holds.set model.probe model.probe holds.set"
		if got := strings.Join(actions, " "); got != want {
			t.Errorf("audit actions %q, want %q", got, want)
		}
		f := w.do(http.MethodGet, "/api/admin/audit?action=model.probe&limit=1", asAdmin, nil).JSON()
		if es := list(f["entries"]); len(es) != 1 || obj(obj(es[0])["after"])["closed"] != true || f["nextCursor"] == nil {
			t.Errorf("newest probe entry %v", f)
		}
		next := w.do(http.MethodGet, "/api/admin/audit?action=model.probe&limit=1&cursor="+fmt.Sprint(f["nextCursor"]), asAdmin, nil).JSON()
		if es := list(next["entries"]); len(es) != 1 || obj(obj(es[0])["after"])["answered"] != false {
			t.Errorf("the page after: %v", next)
		}
		hold := list(w.do(http.MethodGet, "/api/admin/audit?target=holds", asAdmin, nil).JSON()["entries"])
		if len(hold) != 2 || obj(obj(hold[1])["before"])["screen"] != false || obj(obj(hold[1])["after"])["screen"] != true {
			t.Errorf("hold entries %v, want before and after", hold)
		}
		checkError(t, w.do(http.MethodGet, "/api/admin/audit?action=nope", asAdmin, nil), 400, "invalid", "action")
		checkError(t, w.do(http.MethodGet, "/api/admin/audit", asAuthor, nil), 403, "forbidden", "")
	})
}

// A verdict by hand, then overturned: the event says overturned with the admin and note, the
// webhook is owed again, and the trail keeps before and after; the same verdict again is 409.
// An overturn needs a note of its own, which the event, the trail and the webhook carry in place
// of the first decision's.
func TestVerdictOverturn(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, func(c *app.Config) { c.WebhooksAllowPrivate = true }).quiet()
		w.created("/api/admin/webhooks", asAdmin, map[string]any{"url": w.env.Server.URL + "/hook", "events": []string{"item.screened"}})
		p := w.pitch(asAuthor, models.VerdictAllow) // the model's verdict
		path := fmt.Sprintf("/api/admin/items/pitch/%d/verdict", p)
		before := w.snapshot()
		checkError(t, w.do(http.MethodPost, path, asAdmin, map[string]any{"verdict": "block"}), 409, "decided", "")
		w.unchanged(t, before, "a verdict without overturn")
		for _, body := range []map[string]any{{"verdict": "block", "overturn": true}, {"verdict": "block", "overturn": true, "note": "  "},
			{"verdict": "block", "overturn": true, "note": nil}} {
			checkError(t, w.do(http.MethodPost, path, asAdmin, body), 400, "invalid", "note")
		}
		w.unchanged(t, before, "an overturn without a note")
		r := w.do(http.MethodPost, path, asAdmin, map[string]any{"verdict": "block", "note": "spam", "overturn": true})
		if r.Status != 200 || r.JSON()["state"] != "blocked" || r.JSON()["verdict"] != "block" {
			t.Fatalf("overturn: %d %s", r.Status, r.Body)
		}
		checkError(t, w.do(http.MethodPost, path, asAdmin, map[string]any{"verdict": "block", "overturn": true, "note": "again"}), 409, "decided", "")
		evs := list(w.do(http.MethodGet, fmt.Sprintf("/api/admin/events?kind=pitch&itemId=%d&outcome=overturned", p), asAdmin, nil).JSON()["events"])
		if len(evs) != 1 || obj(evs[0])["note"] != "spam" || obj(evs[0])["verdict"] != "block" || num(obj(evs[0])["adminId"]) != w.uid[asAdmin] {
			t.Errorf("overturned events %v", evs)
		}
		if got := w.do(http.MethodGet, "/api/pitches", asAnon, nil).JSON(); strings.Contains(fmt.Sprint(got), "a pitch by author") {
			t.Errorf("the blocked pitch is still public: %v", got)
		}
		var n int64
		w.store().RawScan(t.Context(), &n, `SELECT COUNT(*) FROM webhook_deliveries WHERE event = 'item.screened'`)
		if n != 2 {
			t.Errorf("%d item.screened deliveries after the overturn, want 2 (the model's verdict, then the overturn's)", n)
		}
		es := list(w.do(http.MethodGet, "/api/admin/audit?action=verdict.overturn", asAdmin, nil).JSON()["entries"])
		if len(es) != 1 || obj(obj(es[0])["before"])["verdict"] != "allow" || obj(obj(es[0])["after"])["verdict"] != "block" ||
			obj(es[0])["target"] != fmt.Sprintf("pitch:%d", p) {
			t.Errorf("overturn entries %v", es)
		}

		// Overturned back to allow by hand: public again, with the second overturn's own note.
		r = w.do(http.MethodPost, path, asAdmin, map[string]any{"verdict": "allow", "overturn": true, "note": "a joke after all"})
		if r.Status != 200 || r.JSON()["state"] != "public" {
			t.Fatalf("overturn back: %d %s", r.Status, r.Body)
		}
		evs = list(w.do(http.MethodGet, fmt.Sprintf("/api/admin/events?kind=pitch&itemId=%d&outcome=overturned", p), asAdmin, nil).JSON()["events"])
		if len(evs) != 2 || obj(evs[0])["note"] != "a joke after all" || obj(evs[0])["verdict"] != "allow" {
			t.Errorf("overturned events %v", evs)
		}
		es = list(w.do(http.MethodGet, "/api/admin/audit?action=verdict.overturn", asAdmin, nil).JSON()["entries"])
		if len(es) != 2 || obj(obj(es[0])["after"])["note"] != "a joke after all" {
			t.Errorf("overturn entries %v", es)
		}
		var payloads []string
		w.store().RawScan(t.Context(), &payloads, `SELECT payload FROM webhook_deliveries WHERE event = 'item.screened' ORDER BY id`)
		if len(payloads) != 3 || strings.Contains(payloads[0], `"note"`) || !strings.Contains(payloads[1], `"note":"spam"`) ||
			!strings.Contains(payloads[2], `"note":"a joke after all"`) || !strings.Contains(payloads[2], fmt.Sprintf(`"decidedBy":%d`, w.uid[asAdmin])) {
			t.Errorf("item.screened payloads %v, want the model's without a note, then each overturn's own", payloads)
		}
	})
}

// Raising an author's limit makes their jobs waiting for the budget due at once; the trail
// keeps the limit before and after.
func TestRaisingTheLimitMakesBudgetJobsDue(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		w.do(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/budget", w.uid[asAuthor]), asAdmin, map[string]any{"dailyLimit": 1})
		a := w.pitch(asAuthor, "")
		b := w.pitch(asAuthor, "")
		w.sweep()
		var waiting models.Job
		for _, id := range []int64{a, b} {
			if j, err := owedtest.ListJobs(t.Context(), w.store(), models.JobFilter{ItemID: id, Kind: models.KindPitch}, 0, 1); err == nil && len(j) == 1 {
				waiting = j[0]
			}
		}
		if waiting.Why == nil || *waiting.Why != models.WhyBudget || !waiting.DueAt.After(w.env.Clock.Now()) {
			t.Fatalf("job %+v, want waiting for the budget", waiting)
		}
		r := w.do(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/budget", w.uid[asAuthor]), asAdmin, map[string]any{"dailyLimit": 5})
		if r.Status != 200 {
			t.Fatalf("raise: %d %s", r.Status, r.Body)
		}
		j := w.job(models.TaskScreen, models.KindPitch, waiting.ItemID)
		if j.DueAt.After(w.env.Clock.Now()) {
			t.Errorf("after raising the limit the job is due %s, want now", j.DueAt)
		}
		es := list(w.do(http.MethodGet, "/api/admin/audit?action=user.budget", asAdmin, nil).JSON()["entries"])
		if len(es) != 2 || num(obj(obj(es[0])["before"])["dailyLimit"]) != 1 || num(obj(obj(es[0])["after"])["dailyLimit"]) != 5 {
			t.Errorf("budget entries %v", es)
		}
	})
}

// The audit trail is pruned past its retention.
func TestAuditRetention(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		w.do(http.MethodPut, "/api/admin/holds", asAdmin, map[string]any{"score": true})
		w.env.Clock.Advance(48 * time.Hour)
		w.do(http.MethodPut, "/api/admin/holds", asAdmin, map[string]any{"score": false})
		n, err := w.store().PruneAudit(t.Context(), w.env.Clock.Now(), 24*time.Hour, 0)
		if err != nil || n < 1 {
			t.Fatalf("pruned %d (%v), want the older entries", n, err)
		}
		if es := list(w.do(http.MethodGet, "/api/admin/audit", asAdmin, nil).JSON()["entries"]); len(es) != 1 || obj(es[0])["action"] != "holds.set" {
			t.Errorf("entries after pruning: %v", es)
		}
	})
}

// The job detail shows the item's whole content (the title is cut at 80 characters).
func TestJobDetailShowsTheWholeContent(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		body := strings.Repeat("a long pitch body, ", 10) + "the end"
		p, err := w.store().CreatePitch(t.Context(), w.uid[asAuthor], body)
		if err != nil {
			t.Fatal(err)
		}
		job := w.job(models.TaskScreen, models.KindPitch, p.ID)
		d := w.do(http.MethodGet, fmt.Sprintf("/api/admin/jobs/%d", job.ID), asAdmin, nil).JSON()
		if it := obj(d["item"]); it["content"] != body || len(fmt.Sprint(it["title"])) != 80 {
			t.Errorf("item = %v, want the whole body as content", it)
		}
	})
}

// An admin ends the walk lock an active scrape holds; the trail records it. Without a walk
// there is nothing to release and nothing recorded.
func TestReleaseTheWalkLock(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		r := w.do(http.MethodPost, "/api/scrapes", asBot, map[string]any{"chatId": "c1", "guildId": "g1", "backend": "puppet", "mode": "history"})
		if r.Status != http.StatusCreated {
			t.Fatalf("scrape: %d %s", r.Status, r.Body)
		}
		if st := w.do(http.MethodGet, "/api/backfill", asAdmin, nil).JSON(); st["walkingChat"] != "c1" {
			t.Fatalf("status before = %v, want c1 walking", st)
		}
		checkError(t, w.do(http.MethodPost, "/api/admin/backfill/walk/release", asBot, nil), 403, "forbidden", "")
		r = w.do(http.MethodPost, "/api/admin/backfill/walk/release", asAdmin, nil)
		if st := r.JSON(); r.Status != 200 || st["walkingChat"] != nil || st["walkingUntil"] != nil {
			t.Errorf("release: %d %s, want no walk", r.Status, r.Body)
		}
		es := list(w.do(http.MethodGet, "/api/admin/audit?action=backfill.walk.release", asAdmin, nil).JSON()["entries"])
		if len(es) != 1 || fmt.Sprint(obj(obj(es[0])["before"])["walking"]) != "[c1]" {
			t.Errorf("release entries %v", es)
		}
		before := w.snapshot()
		if r := w.do(http.MethodPost, "/api/admin/backfill/walk/release", asAdmin, nil); r.Status != 200 {
			t.Errorf("a second release: %d %s", r.Status, r.Body)
		}
		w.unchanged(t, before, "releasing no walk")
	})
}
