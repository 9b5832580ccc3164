package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

func itemPage(t *testing.T, w *world, kind models.Kind, id int64) map[string]any {
	t.Helper()
	r := w.do(http.MethodGet, fmt.Sprintf("/api/admin/items/%s/%d", kind, id), asAdmin, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("the page of %s %d: %d %s", kind, id, r.Status, r.Body)
	}
	return r.JSON()
}

// An item's page shows its whole history: the failed attempt with its error, the model's
// block, the appeal with its note and its claim, the decision on it, the overturn with its own
// note, who did each, the audit entries and the deliveries they caused.
func TestItemPage(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, allowPrivate).quiet()
		rcv := newHookReceiver(t)
		subscribe(w, rcv.URL+"/hook", "item.screened", "item.appeal.decided")
		mod2, mod2Tok := w.env.User("mod2", models.RoleAdmin)

		w.env.Model.Garbage()
		p := w.pitch(asAuthor, "")
		w.sweep()
		w.env.Model.Reset()
		w.env.Model.SetVerdict("block", 0.9)
		w.env.Clock.Advance(time.Hour)
		w.sweep()
		if r := w.do(http.MethodPost, fmt.Sprintf("/api/listeners/items/pitch/%d/appeal", p), asAuthor, map[string]any{"note": "a joke"}); r.Status != 201 {
			t.Fatalf("appeal: %d %s", r.Status, r.Body)
		}
		w.env.Clock.Advance(time.Minute)
		if r := w.env.Do(http.MethodPost, fmt.Sprintf("/api/admin/review/pitch/%d/claim", p), mod2Tok, nil); r.Status != 200 {
			t.Fatalf("claim: %d %s", r.Status, r.Body)
		}
		page := itemPage(t, w, models.KindPitch, p)
		if c := obj(obj(page["appeal"])["claim"]); num(c["adminId"]) != mod2 || c["adminName"] != "mod2" || c["mine"] != false {
			t.Errorf("the appeal's claim: %v", page["appeal"])
		}
		if r := w.env.Do(http.MethodPost, verdictPath(models.KindPitch, p), mod2Tok, map[string]any{"verdict": "allow", "note": "a joke indeed"}); r.Status != 200 {
			t.Fatalf("grant the appeal: %d %s", r.Status, r.Body)
		}
		w.env.Clock.Advance(time.Minute)
		r := w.do(http.MethodPost, verdictPath(models.KindPitch, p), asAdmin, map[string]any{"verdict": "block", "overturn": true, "note": "spam after all"})
		if r.Status != 200 {
			t.Fatalf("overturn: %d %s", r.Status, r.Body)
		}
		deliver(w)

		page = itemPage(t, w, models.KindPitch, p)
		if page["kind"] != "pitch" || num(page["id"]) != p || page["content"] != "a pitch by author" || page["verdict"] != "block" {
			t.Errorf("the item: %v", page)
		}
		if a := obj(page["author"]); num(a["id"]) != w.uid[asAuthor] || a["name"] != "ann" {
			t.Errorf("author: %v", a)
		}
		if len(list(page["jobs"])) != 0 {
			t.Errorf("jobs of a settled item: %v", page["jobs"])
		}
		var failed bool
		for _, e := range list(page["events"]) {
			failed = failed || obj(e)["outcome"] == "pending" && obj(e)["error"] != nil
		}
		if !failed {
			t.Errorf("no failed attempt with its error among %v", page["events"])
		}
		vs := list(page["verdicts"])
		want := []struct {
			outcome, verdict string
			admin            int64
			note             any
		}{{"block", "block", 0, nil}, {"decided", "allow", mod2, "a joke indeed"}, {"overturned", "block", w.uid[asAdmin], "spam after all"}}
		if len(vs) != len(want) {
			t.Fatalf("verdicts: %v", vs)
		}
		for i, wv := range want {
			v := obj(vs[i])
			if v["outcome"] != wv.outcome || v["verdict"] != wv.verdict || num(v["adminId"]) != wv.admin || v["note"] != wv.note {
				t.Errorf("verdict %d: %v, want %+v", i, v, wv)
			}
		}
		if n := obj(vs[1])["adminName"]; n != "mod2" {
			t.Errorf("the appeal's decider's name: %v", n)
		}
		ap := obj(page["appeal"])
		if ap["note"] != "a joke" || num(ap["decidedBy"]) != mod2 || ap["decidedByName"] != "mod2" || ap["outcome"] != "allow" || ap["claim"] != nil {
			t.Errorf("appeal: %v", ap)
		}
		if page["review"] != nil {
			t.Errorf("review: %v, want none (the model was sure)", page["review"])
		}
		var overturn bool
		for _, e := range list(page["audit"]) {
			overturn = overturn || obj(e)["action"] == models.AuditOverturn && obj(e)["target"] == fmt.Sprintf("pitch:%d", p)
		}
		if !overturn {
			t.Errorf("audit: %v, want the overturn", page["audit"])
		}
		events := map[string]int{}
		for _, d := range list(page["deliveries"]) {
			events[obj(d)["event"].(string)]++
		}
		if events["item.screened"] != 3 || events["item.appeal.decided"] != 1 {
			t.Errorf("deliveries by event: %v, want 3 item.screened (block, allow, block) and 1 item.appeal.decided", events)
		}

		// Another item's page shows none of it: only its own verdict and delivery.
		other := w.pitch(asOther, models.VerdictAllow)
		page = itemPage(t, w, models.KindPitch, other)
		if len(list(page["deliveries"])) != 1 || len(list(page["audit"])) != 0 || page["appeal"] != nil || len(list(page["verdicts"])) != 1 {
			t.Errorf("another pitch's page: %v", page)
		}
		for _, path := range []string{"/api/admin/items/song/1", fmt.Sprintf("/api/admin/items/pitch/%d", p+1000),
			fmt.Sprintf("/api/admin/items/revision/%d", p+1000), "/api/admin/items/pitch/x"} {
			checkError(t, w.do(http.MethodGet, path, asAdmin, nil), 404, "not_found", "")
		}
	})
}

// auditOf lists the audit trail through the API with query.
func auditOf(t *testing.T, w *world, query string) []map[string]any {
	t.Helper()
	r := w.do(http.MethodGet, "/api/admin/audit"+query, asAdmin, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("audit%s: %d %s", query, r.Status, r.Body)
	}
	var out []map[string]any
	for _, e := range list(r.JSON()["entries"]) {
		out = append(out, obj(e))
	}
	return out
}

func actionsOf(entries []map[string]any) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e["action"].(string))
	}
	return out
}

// Every decision is audited with before and after: a review claim (not its renewal) and its
// release, an appeal's decision, a webhook secret's rotation; the trail is filtered by target
// and by admin, and refuses malformed filters.
func TestEveryDecisionAudited(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, allowPrivate).quiet()
		mod2, mod2Tok := w.env.User("mod2", models.RoleAdmin)
		p := w.pitch(asAuthor, models.VerdictBlock)
		if r := w.do(http.MethodPost, fmt.Sprintf("/api/listeners/items/pitch/%d/appeal", p), asAuthor, map[string]any{"note": "a joke"}); r.Status != 201 {
			t.Fatalf("appeal: %d %s", r.Status, r.Body)
		}
		claimPath := fmt.Sprintf("/api/admin/review/pitch/%d/claim", p)
		target := fmt.Sprintf("pitch:%d", p)
		for _, step := range []struct {
			tok    string
			method string
			status int
		}{
			{mod2Tok, http.MethodPost, 200},        // taken: audited
			{mod2Tok, http.MethodPost, 200},        // renewed: not audited
			{w.tok[asAdmin], http.MethodPost, 409}, // held by mod2
			{w.tok[asAdmin], http.MethodDelete, 409},
			{mod2Tok, http.MethodDelete, 204}, // released: audited
			{mod2Tok, http.MethodDelete, 204}, // nothing to release: nothing audited
			{w.tok[asAdmin], http.MethodPost, 200},
		} {
			if r := w.env.Do(step.method, claimPath, step.tok, nil); r.Status != step.status {
				t.Fatalf("%s %s: %d %s, want %d", step.method, claimPath, r.Status, r.Body, step.status)
			}
			w.env.Clock.Advance(time.Second)
		}
		// Released, the entry is free: the queue shows no claim until the admin's.
		r := w.do(http.MethodPost, verdictPath(models.KindPitch, p), asAdmin, map[string]any{"verdict": "allow", "note": "fine"})
		if r.Status != 200 {
			t.Fatalf("decide the appeal: %d %s", r.Status, r.Body)
		}
		checkError(t, w.env.Do(http.MethodDelete, claimPath, mod2Tok, nil), 404, "not_found", "")

		got := auditOf(t, w, "?target="+target)
		if a := actionsOf(got); fmt.Sprint(a) != fmt.Sprint([]string{models.AuditAppealDecide, models.AuditReviewClaim, models.AuditReviewRelease, models.AuditReviewClaim}) {
			t.Fatalf("the item's trail: %v", a)
		}
		decide, claimAdmin, release, claimMod2 := got[0], got[1], got[2], got[3]
		if b, a := obj(decide["before"]), obj(decide["after"]); b["verdict"] != "block" || b["appeal"] != "pending" || b["note"] != "a joke" ||
			a["verdict"] != "allow" || a["appeal"] != "granted" || a["note"] != "fine" || num(decide["adminId"]) != w.uid[asAdmin] {
			t.Errorf("the appeal's decision: %v", decide)
		}
		if claimMod2["before"] != nil || num(obj(claimMod2["after"])["claimedBy"]) != mod2 || obj(claimMod2["after"])["until"] == nil {
			t.Errorf("mod2's claim: %v", claimMod2)
		}
		if num(obj(release["before"])["claimedBy"]) != mod2 || release["after"] != nil || num(release["adminId"]) != mod2 {
			t.Errorf("mod2's release: %v", release)
		}
		if claimAdmin["before"] != nil || num(obj(claimAdmin["after"])["claimedBy"]) != w.uid[asAdmin] {
			t.Errorf("the admin's claim after the release: %v", claimAdmin)
		}
		if a := actionsOf(auditOf(t, w, fmt.Sprintf("?adminId=%d", mod2))); fmt.Sprint(a) != fmt.Sprint([]string{models.AuditReviewRelease, models.AuditReviewClaim}) {
			t.Errorf("mod2's trail: %v", a)
		}
		if a := actionsOf(auditOf(t, w, fmt.Sprintf("?adminId=%d&target=%s&action=review.claim", mod2, target))); len(a) != 1 {
			t.Errorf("mod2's claims of the pitch: %v", a)
		}
		page := itemPage(t, w, models.KindPitch, p)
		if n := len(list(page["audit"])); n != 4 {
			t.Errorf("the item page's audit: %d entries, want 4", n)
		}

		// A webhook secret's rotation: when the one before stops signing, never a secret.
		hook, first := subscribe(w, "http://127.0.0.1:9/hook", "item.screened")
		r = w.do(http.MethodPost, fmt.Sprintf("/api/admin/webhooks/%d/secret", hook), asAdmin, nil)
		if r.Status != 200 {
			t.Fatalf("rotate: %d %s", r.Status, r.Body)
		}
		rot := auditOf(t, w, fmt.Sprintf("?target=webhook:%d&action=%s", hook, models.AuditWebhookSecret))
		if len(rot) != 1 || obj(rot[0]["before"])["previousSecretUntil"] != nil || obj(rot[0]["after"])["previousSecretUntil"] != r.JSON()["previousSecretUntil"] {
			t.Errorf("the rotation's entry: %v", rot)
		}
		if s := fmt.Sprint(rot); strings.Contains(s, first) || strings.Contains(s, r.JSON()["secret"].(string)) {
			t.Errorf("a secret in the trail: %v", rot)
		}

		before := w.snapshot()
		for q, field := range map[string]string{"?adminId=x": "adminId", "?adminId=0": "adminId", "?target=Pitch:1": "target",
			"?target=": "target", "?target=pitch:1&target=pitch:2": "target", "?action=review.nap": "action"} {
			checkError(t, w.do(http.MethodGet, "/api/admin/audit"+q, asAdmin, nil), 400, "invalid", field)
		}
		w.unchanged(t, before, "malformed audit filters")
	})
}

// An appeal of a block by hand heard by an admin whose account the blocker created: allowed
// (same_moderator compares accounts), but made visible on the item's page and in the trail.
func TestAppealHeardByTheBlockersCreation(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		p := w.pitch(asAuthor, "")
		if r := w.do(http.MethodPost, verdictPath(models.KindPitch, p), asAdmin, map[string]any{"verdict": "block", "note": "spam"}); r.Status != 200 {
			t.Fatalf("block by hand: %d %s", r.Status, r.Body)
		}
		made := w.created("/api/admin/users", asAdmin, map[string]any{"name": "sock", "role": "admin"})
		if r := w.do(http.MethodPost, fmt.Sprintf("/api/listeners/items/pitch/%d/appeal", p), asAuthor, map[string]any{}); r.Status != 201 {
			t.Fatalf("appeal: %d %s", r.Status, r.Body)
		}
		checkError(t, w.do(http.MethodPost, verdictPath(models.KindPitch, p), asAdmin, map[string]any{"verdict": "allow"}), 409, "same_moderator", "")
		if r := w.env.Do(http.MethodPost, verdictPath(models.KindPitch, p), made["token"].(string), map[string]any{"verdict": "allow"}); r.Status != 200 {
			t.Fatalf("the created admin decides: %d %s", r.Status, r.Body)
		}
		ap := obj(itemPage(t, w, models.KindPitch, p)["appeal"])
		if c := obj(ap["decidedByCreator"]); num(c["adminId"]) != w.uid[asAdmin] || num(ap["blockedBy"]) != w.uid[asAdmin] {
			t.Errorf("the appeal on the item's page: %v", ap)
		}
		es := auditOf(t, w, "?action="+models.AuditAppealDecide)
		if len(es) != 1 || num(obj(obj(es[0]["after"])["deciderCreatedBy"])["adminId"]) != w.uid[asAdmin] {
			t.Errorf("the decision in the trail: %v", es)
		}
	})
}
