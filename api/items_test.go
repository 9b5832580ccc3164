package api_test

import (
	"fmt"
	"net/http"
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
