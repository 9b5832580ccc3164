package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// A verdict by hand and an appeal's answer may carry a public reason: the author sees it in
// their view (the verdict's reason on the item, the answer's on the appeal), on their stream and
// in item.appeal.decided; the moderator's note never reaches any of them. The admin's item
// page, events and audit trail keep both. A bad reason is refused in the error shape, writing
// nothing.
func TestPublicReasonReachesTheAuthorNeverTheNote(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, allowPrivate).quiet()
		rcv := newHookReceiver(t)
		subscribe(w, rcv.URL+"/hook", "item.appeal.decided")
		_, mod2Tok := w.env.User("mod2", models.RoleAdmin)
		const secret = "internal-NOTE"

		byHand := w.pitch(asAuthor, "")
		byModel := w.pitch(asAuthor, models.VerdictBlock)

		// Bad reasons: nothing written.
		before := w.snapshot()
		checkError(t, w.do(http.MethodPost, verdictPath(models.KindPitch, byHand), asAdmin,
			map[string]any{"verdict": "block", "reason": strings.Repeat("x", 501)}), 400, "invalid", "reason")
		checkError(t, w.do(http.MethodPost, verdictPath(models.KindPitch, byHand), asAdmin,
			map[string]any{"verdict": "block", "reason": "a\x00b"}), 400, "invalid", "reason")
		checkError(t, w.do(http.MethodPost, verdictPath(models.KindPitch, byHand), asAdmin,
			map[string]any{"verdict": "block", "reason": 7}), 400, "invalid", "reason")
		w.unchanged(t, before, "verdicts with bad reasons")

		r := w.do(http.MethodPost, verdictPath(models.KindPitch, byHand), asAdmin,
			map[string]any{"verdict": "block", "note": secret + " 1", "reason": "  Spam links are not allowed.  "})
		if r.Status != http.StatusOK {
			t.Fatalf("block by hand: %d %s", r.Status, r.Body)
		}
		if it := mineItem(t, w, asAuthor, models.KindPitch, byHand); it["reason"] != "Spam links are not allowed." {
			t.Errorf("the author's view of a block with a reason: %v", it)
		}
		if it := mineItem(t, w, asAuthor, models.KindPitch, byModel); it["reason"] != nil {
			t.Errorf("the model's block shows a reason: %v", it)
		}

		// Appeals: one denied with an answer, one granted with an answer.
		for _, id := range []int64{byHand, byModel} {
			if r := w.do(http.MethodPost, fmt.Sprintf("/api/listeners/items/pitch/%d/appeal", id), asAuthor, map[string]any{}); r.Status != http.StatusCreated {
				t.Fatalf("appeal: %d %s", r.Status, r.Body)
			}
		}
		if r := w.env.Do(http.MethodPost, verdictPath(models.KindPitch, byHand), mod2Tok,
			map[string]any{"verdict": "block", "note": secret + " 2", "reason": "The links still point to spam."}); r.Status != http.StatusOK {
			t.Fatalf("deny: %d %s", r.Status, r.Body)
		}
		if r := w.do(http.MethodPost, verdictPath(models.KindPitch, byModel), asAdmin,
			map[string]any{"verdict": "allow", "note": secret + " 3", "reason": "Fine on a second look."}); r.Status != http.StatusOK {
			t.Fatalf("grant: %d %s", r.Status, r.Body)
		}
		denied := mineItem(t, w, asAuthor, models.KindPitch, byHand)
		if denied["reason"] != "Spam links are not allowed." || obj(denied["appeal"])["reason"] != "The links still point to spam." ||
			obj(denied["appeal"])["state"] != "denied" {
			t.Errorf("a denied appeal as the author sees it: %v", denied)
		}
		granted := mineItem(t, w, asAuthor, models.KindPitch, byModel)
		if granted["reason"] != "Fine on a second look." || obj(granted["appeal"])["reason"] != "Fine on a second look." ||
			granted["state"] != "public" {
			t.Errorf("a granted appeal as the author sees it: %v", granted)
		}

		// One kind's page reads that kind's own statement: the same reason.
		if r := w.do(http.MethodGet, "/api/listeners/mine?kind=pitch", asAuthor, nil); !strings.Contains(string(r.Body), `"reason":"Fine on a second look."`) {
			t.Errorf("a page of pitches lacks the reason: %s", r.Body)
		}

		// Never the note: not in the view, not on the stream.
		view := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil)
		if strings.Contains(string(view.Body), secret) {
			t.Errorf("the author's view shows a moderator's note: %s", view.Body)
		}
		events, _, hangUp := w.stream(asAuthor, "")
		ev := next(t, events, false)
		hangUp()
		if !strings.Contains(ev.Data, `"reason":"The links still point to spam."`) || strings.Contains(ev.Data, secret) {
			t.Errorf("the stream's view: %s", ev.Data)
		}

		// item.appeal.decided: the answer's reason, never the note.
		deliver(w)
		var decided []string
		for _, req := range rcv.requests() {
			if body := string(req.body); strings.Contains(body, `"type":"item.appeal.decided"`) {
				decided = append(decided, body)
			}
		}
		all := strings.Join(decided, "\n")
		if len(decided) != 2 || !strings.Contains(all, `"reason":"The links still point to spam."`) ||
			!strings.Contains(all, `"reason":"Fine on a second look."`) || strings.Contains(all, secret) {
			t.Errorf("item.appeal.decided deliveries: %s", all)
		}

		// The moderators see both.
		page := w.do(http.MethodGet, fmt.Sprintf("/api/admin/items/pitch/%d", byHand), asAdmin, nil).JSON()
		var seen []string
		for _, v := range list(page["verdicts"]) {
			if m := obj(v); m["adminId"] != nil {
				seen = append(seen, fmt.Sprint(m["note"], " / ", m["reason"]))
			}
		}
		if want := []string{secret + " 1 / Spam links are not allowed.", secret + " 2 / The links still point to spam."}; fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Errorf("the item page's verdicts by hand: %v, want %v", seen, want)
		}
		if a := obj(page["appeal"]); a["reason"] != "The links still point to spam." {
			t.Errorf("the item page's appeal: %v", a)
		}
		audit := w.do(http.MethodGet, "/api/admin/audit?target=pitch:"+fmt.Sprint(byModel), asAdmin, nil)
		if !strings.Contains(string(audit.Body), `"reason":"Fine on a second look."`) {
			t.Errorf("the appeal's audit entry lacks the reason: %s", audit.Body)
		}
	})
}
