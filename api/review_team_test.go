package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// idsOf are the item ids of a queue page's entries, in order.
func idsOf(q map[string]any) []int64 {
	var out []int64
	for _, e := range list(q["entries"]) {
		out = append(out, num(obj(e)["id"]))
	}
	return out
}

// The queue serves a team: each moderator opens at the oldest entry nobody else holds
// (claim=available), sees their own claims (mine) and the free ones (unclaimed), and a
// released (skipped) entry is free for the next at once. An appeal of a block by hand shows
// the blocker's note.
func TestReviewQueueServesATeam(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, reviewBand)
		_, mod2Tok := w.env.User("mod2", models.RoleAdmin)
		w.env.Model.SetVerdict("allow", 0.6)
		var items []int64
		for range 3 {
			items = append(items, w.pitch(asAuthor, ""))
			w.sweep()
			w.env.Clock.Advance(time.Second)
		}
		queue := func(tok, query string) []int64 {
			t.Helper()
			r := w.env.Do(http.MethodGet, "/api/admin/review"+query, tok, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("queue%s: %d %s", query, r.Status, r.Body)
			}
			return idsOf(r.JSON())
		}
		claim := func(tok, method string, id int64) {
			t.Helper()
			if r := w.env.Do(method, fmt.Sprintf("/api/admin/review/pitch/%d/claim", id), tok, nil); r.Status >= 300 {
				t.Fatalf("%s claim of %d: %d %s", method, id, r.Status, r.Body)
			}
		}
		admin := w.tok[asAdmin]
		claim(mod2Tok, http.MethodPost, items[0])
		for _, c := range []struct {
			tok, query string
			want       []int64
		}{
			{admin, "?claim=available", items[1:]},
			{admin, "?claim=available&limit=1", items[1:2]},
			{admin, "?claim=unclaimed", items[1:]},
			{admin, "?claim=mine", nil},
			{mod2Tok, "?claim=mine", items[:1]},
			{mod2Tok, "?claim=available", items},
			{admin, "", items},
		} {
			if got := queue(c.tok, c.query); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("queue%s = %v, want %v", c.query, got, c.want)
			}
		}
		claim(admin, http.MethodPost, items[1])
		if got := queue(admin, "?claim=available"); fmt.Sprint(got) != fmt.Sprint(items[1:]) {
			t.Errorf("available with a claim of one's own: %v", got)
		}
		if got := queue(mod2Tok, "?claim=unclaimed"); fmt.Sprint(got) != fmt.Sprint(items[2:]) {
			t.Errorf("unclaimed: %v", got)
		}
		// mod2 skips the first entry: free for the admin at once, not after five minutes.
		claim(mod2Tok, http.MethodDelete, items[0])
		if got := queue(admin, "?claim=unclaimed"); fmt.Sprint(got) != fmt.Sprint([]int64{items[0], items[2]}) {
			t.Errorf("unclaimed after the release: %v", got)
		}
		claim(admin, http.MethodPost, items[0])
		// A claim that ran out is nobody's.
		w.env.Clock.Advance(models.ReviewClaimFor + time.Second)
		if got := queue(mod2Tok, "?claim=unclaimed"); fmt.Sprint(got) != fmt.Sprint(items) {
			t.Errorf("unclaimed after the claims ran out: %v", got)
		}
		for _, q := range []string{"?claim=yours", "?claim=", "?claim=mine&claim=unclaimed"} {
			checkError(t, w.do(http.MethodGet, "/api/admin/review"+q, asAdmin, nil), 400, "invalid", "claim")
		}

		// Appeals: the blocker's note beside a block by hand; none for the model's.
		byHand := w.pitch(asAuthor, "")
		w.sweep()
		if r := w.do(http.MethodPost, verdictPath(models.KindPitch, byHand), asAdmin, map[string]any{"verdict": "block", "note": "off-topic"}); r.Status != 200 {
			t.Fatalf("block by hand: %d %s", r.Status, r.Body)
		}
		byModel := w.pitch(asAuthor, models.VerdictBlock)
		for _, id := range []int64{byHand, byModel} {
			if r := w.do(http.MethodPost, fmt.Sprintf("/api/listeners/items/pitch/%d/appeal", id), asAuthor, map[string]any{}); r.Status != 201 {
				t.Fatalf("appeal: %d %s", r.Status, r.Body)
			}
		}
		for _, e := range list(reviewQueue(t, w, "?reason=appeal")["entries"]) {
			e := obj(e)
			want := any(nil)
			if num(e["id"]) == byHand {
				want = "off-topic"
			}
			if e["blockNote"] != want {
				t.Errorf("appeal of %v: blockNote %v, want %v", e["id"], e["blockNote"], want)
			}
		}
	})
}
