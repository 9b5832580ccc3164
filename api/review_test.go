package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// reviewBand sets the review band: 0.8 for every kind but comments (0.5).
func reviewBand(c *app.Config) {
	c.ReviewBelow = 0.8
	c.ReviewBelowComment = 0.5
}

// mineItem finds an item in the author's view.
func mineItem(t *testing.T, w *world, as role, kind models.Kind, id int64) map[string]any {
	t.Helper()
	r := w.do(http.MethodGet, "/api/listeners/mine", as, nil)
	for _, it := range list(r.JSON()["items"]) {
		if m := obj(it); m["kind"] == string(kind) && num(m["id"]) == id {
			return m
		}
	}
	t.Fatalf("%s %d not in the view: %s", kind, id, r.Body)
	return nil
}

func verdictPath(kind models.Kind, id int64) string {
	return fmt.Sprintf("/api/admin/items/%s/%d/verdict", kind, id)
}

func reviewQueue(t *testing.T, w *world, query string) map[string]any {
	t.Helper()
	r := w.do(http.MethodGet, "/api/admin/review"+query, asAdmin, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("review queue%s: %d %s", query, r.Status, r.Body)
	}
	return r.JSON()
}

// A verdict below the band (per kind) waits for a moderator: pending with why review, owing
// no model call and charging nothing more however long it waits; the queue shows it with the
// model's suggestion, and a moderator's verdict settles it.
func TestReviewBand(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, reviewBand, allowPrivate)
		rcv := newHookReceiver(t)
		subscribe(w, rcv.URL+"/hook", "item.screened")
		w.env.Model.SetVerdict("block", 0.7)
		songID, rev := w.song(asAuthor, "")
		w.sweep()
		w.env.Clock.Advance(time.Second)
		com := w.comment(asAuthor, songID, "")
		w.sweep()
		w.env.Clock.Advance(time.Second)
		p := w.pitch(asAuthor, "")
		w.sweep()
		calls := w.env.Model.Calls()
		if calls != 3 {
			t.Fatalf("model calls = %d, want 3", calls)
		}

		// 0.7 is below the revision and pitch bands (0.8), not the comment band (0.5).
		if it := mineItem(t, w, asAuthor, models.KindComment, com); it["state"] != "blocked" {
			t.Errorf("comment at 0.7 with band 0.5: %v, want blocked", it)
		}
		for _, item := range []struct {
			kind models.Kind
			id   int64
		}{{models.KindRevision, rev}, {models.KindPitch, p}} {
			it := mineItem(t, w, asAuthor, item.kind, item.id)
			jobs := list(it["jobs"])
			if it["state"] != "pending" || it["verdict"] != nil || len(jobs) != 1 || obj(jobs[0])["why"] != "review" || obj(jobs[0])["nextAttemptAt"] != nil {
				t.Errorf("%s at 0.7 with band 0.8: %v, want pending with why review", item.kind, it)
			}
		}
		spent := num(obj(w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()["budget"])["spent"])
		if spent != 3 {
			t.Fatalf("spent = %d, want 3 (one call each)", spent)
		}

		// Waiting owes nothing: a day later, sweeps and the author's view ask and charge nothing.
		w.env.Clock.Advance(26 * time.Hour)
		w.sweep()
		w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil)
		w.sweep()
		if got := w.env.Model.Calls(); got != calls {
			t.Errorf("model calls after waiting = %d, want %d", got, calls)
		}
		mine := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()
		if spent := num(obj(mine["budget"])["spent"]); spent != 0 {
			t.Errorf("spent on the next day = %d, want 0", spent)
		}
		// Nor does a retry ask the model again.
		job := w.job(models.TaskScreen, models.KindPitch, p)
		checkError(t, w.do(http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/retry", job.ID), asAdmin, nil), 409, "review", "")
		if r := w.do(http.MethodPost, "/api/admin/jobs/retry", asAdmin, map[string]any{}); num(r.JSON()["retried"]) != 0 {
			t.Errorf("bulk retry: %s, want none retried", r.Body)
		}
		w.sweep()
		if got := w.env.Model.Calls(); got != calls {
			t.Errorf("model calls after retries = %d, want %d", got, calls)
		}
		r := w.do(http.MethodGet, "/api/admin/jobs?why=review", asAdmin, nil)
		if n := len(list(r.JSON()["jobs"])); n != 2 {
			t.Errorf("jobs with why review = %d, want 2: %s", n, r.Body)
		}

		// The queue: oldest first, the whole content, the suggestion, the author's history.
		q := reviewQueue(t, w, "")
		entries := list(q["entries"])
		if len(entries) != 2 || num(obj(q["counts"])["unsure"]) != 2 || num(obj(q["counts"])["appeal"]) != 0 {
			t.Fatalf("queue = %v", q)
		}
		first := obj(entries[0])
		if first["kind"] != "revision" || num(first["id"]) != rev || first["reason"] != "unsure" || first["suggestion"] != "block" ||
			first["confidence"] != 0.7 || first["claim"] != nil {
			t.Errorf("first entry = %v", first)
		}
		if c := obj(first["content"]); c["text"] != `s("bd sd")` || c["title"] != "Song of author" {
			t.Errorf("content = %v", c)
		}
		if a := obj(first["author"]); num(a["id"]) != w.uid[asAuthor] || a["name"] != "ann" || num(a["allowed"]) != 0 || num(a["blocked"]) != 1 {
			t.Errorf("author = %v, want ann with 1 blocked (the comment)", a)
		}
		if q := reviewQueue(t, w, "?kind=pitch"); len(list(q["entries"])) != 1 {
			t.Errorf("kind=pitch: %v", q)
		}
		if q := reviewQueue(t, w, "?reason=appeal"); len(list(q["entries"])) != 0 {
			t.Errorf("reason=appeal: %v", q)
		}
		if q := reviewQueue(t, w, fmt.Sprintf("?userId=%d", w.uid[asOther])); len(list(q["entries"])) != 0 {
			t.Errorf("another author: %v", q)
		}
		page := reviewQueue(t, w, "?limit=1")
		if len(list(page["entries"])) != 1 || page["nextCursor"] == nil {
			t.Fatalf("page 1: %v", page)
		}
		page = reviewQueue(t, w, "?limit=1&cursor="+page["nextCursor"].(string))
		if e := list(page["entries"]); len(e) != 1 || num(obj(e[0])["id"]) != p || page["nextCursor"] != nil {
			t.Errorf("page 2: %v", page)
		}
		for bad, field := range map[string]string{"?reason=maybe": "reason", "?kind=song": "kind", "?limit=0": "limit", "?cursor=x": "cursor"} {
			checkError(t, w.do(http.MethodGet, "/api/admin/review"+bad, asAdmin, nil), 400, "invalid", field)
		}

		// A moderator decides with the verdict route: the item settles, the entry leaves.
		w.env.Clock.Advance(90 * time.Second)
		r = w.do(http.MethodPost, verdictPath(models.KindPitch, p), asAdmin, map[string]any{"verdict": "allow"})
		if r.Status != 200 || r.JSON()["state"] != "public" {
			t.Fatalf("decide: %d %s", r.Status, r.Body)
		}
		if it := mineItem(t, w, asAuthor, models.KindPitch, p); it["state"] != "public" || len(list(it["jobs"])) != 0 {
			t.Errorf("after the decision: %v", it)
		}
		deliver(w)
		var screened []string
		for _, req := range rcv.requests() {
			screened = append(screened, string(req.body))
		}
		// The comment's verdict (the model's, no decider) and the moderator's, in either order.
		slices.Sort(screened) // by timestamp: the comment was screened a day before the decision
		if len(screened) != 2 || strings.Contains(screened[0], "decidedBy") || !strings.Contains(screened[0], `"kind":"comment"`) ||
			!strings.Contains(screened[1], fmt.Sprintf(`"kind":"pitch","id":%d,`, p)) || !strings.Contains(screened[1], fmt.Sprintf(`"decidedBy":%d`, w.uid[asAdmin])) {
			t.Errorf("item.screened deliveries: %v, want the moderator's verdict with decidedBy", screened)
		}
		if q := reviewQueue(t, w, ""); len(list(q["entries"])) != 1 || num(obj(q["counts"])["unsure"]) != 1 {
			t.Errorf("queue after the decision: %v", q)
		}
		m := w.do(http.MethodGet, "/api/admin/review/measures", asAdmin, nil).JSON()
		if num(obj(m["decided"])["unsure"]) != 1 || num(m["suggested"]) != 1 || num(m["overturned"]) != 1 || m["overturnedShare"] != 1.0 {
			t.Errorf("measures = %v", m)
		}
		if p50 := obj(m["p50Seconds"])["unsure"]; p50 == nil || p50.(float64) < 26*3600 {
			t.Errorf("p50 = %v, want the day and more it waited", p50)
		}
	})
}

// The band is off by default: an unsure verdict settles as before.
func TestReviewBandOff(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		w.env.Model.SetVerdict("block", 0.01)
		p := w.pitch(asAuthor, "")
		w.sweep()
		if it := mineItem(t, w, asAuthor, models.KindPitch, p); it["state"] != "blocked" {
			t.Errorf("band off: %v, want blocked", it)
		}
		if q := reviewQueue(t, w, ""); len(list(q["entries"])) != 0 {
			t.Errorf("queue with the band off: %v", q)
		}
	})
}

// Only admins see and claim the queue; only the item's author appeals.
func TestReviewAuthorization(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, reviewBand)
		p := w.pitch(asAuthor, models.VerdictBlock)
		for _, as := range []role{asAnon, asAuthor, asOther, asBot} {
			want := 403
			if as == asAnon {
				want = 401
			}
			for _, path := range []string{"/api/admin/review", "/api/admin/review/measures"} {
				if r := w.do(http.MethodGet, path, as, nil); r.Status != want {
					t.Errorf("%s GET %s: %d, want %d", as, path, r.Status, want)
				}
			}
			if r := w.do(http.MethodPost, fmt.Sprintf("/api/admin/review/pitch/%d/claim", p), as, nil); r.Status != want {
				t.Errorf("%s claim: %d, want %d", as, r.Status, want)
			}
		}
		before := w.snapshot()
		path := fmt.Sprintf("/api/listeners/items/pitch/%d/appeal", p)
		for as, want := range map[role]int{asAnon: 401, asBot: 403, asAdmin: 403, asOther: 404} {
			if r := w.do(http.MethodPost, path, as, map[string]any{}); r.Status != want {
				t.Errorf("%s appeal: %d %s, want %d", as, r.Status, r.Body, want)
			}
		}
		checkError(t, w.do(http.MethodPost, "/api/listeners/items/song/1/appeal", asAuthor, map[string]any{}), 404, "not_found", "")
		checkError(t, w.do(http.MethodPost, path, asAuthor, map[string]any{"note": strings.Repeat("n", 501)}), 400, "invalid", "note")
		checkError(t, w.do(http.MethodPost, path, asAuthor, map[string]any{"note": 3}), 400, "invalid", "note")
		checkError(t, w.do(http.MethodPost, fmt.Sprintf("/api/admin/review/pitch/%d/claim", p), asAdmin, nil), 404, "not_found", "")
		w.unchanged(t, before, "refused appeals and claims")
	})
}

// Appeals: once per item, only of a block; a block by hand is heard by another admin, the
// model's by any; the author sees the appeal and its outcome; item.appeal.decided is owed.
func TestAppeals(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, allowPrivate).quiet() // the pending pitch stays pending
		rcv := newHookReceiver(t)
		subscribe(w, rcv.URL+"/hook", "item.appeal.decided", "item.screened")
		mod2, mod2Tok := w.env.User("mod2", models.RoleAdmin)

		allowed := w.pitch(asAuthor, models.VerdictAllow)
		pending := w.pitch(asAuthor, "")
		byModel := w.pitch(asAuthor, models.VerdictBlock)
		_, byHand := w.song(asAuthor, "")
		r := w.do(http.MethodPost, verdictPath(models.KindRevision, byHand), asAdmin, map[string]any{"verdict": "block", "note": "off-topic"})
		if r.Status != 200 {
			t.Fatalf("block by hand: %d %s", r.Status, r.Body)
		}
		appeal := func(kind models.Kind, id int64, body any) owedtest.Response {
			return w.do(http.MethodPost, fmt.Sprintf("/api/listeners/items/%s/%d/appeal", kind, id), asAuthor, body)
		}
		before := w.snapshot()
		checkError(t, appeal(models.KindPitch, allowed, map[string]any{}), 409, "not_blocked", "")
		checkError(t, appeal(models.KindPitch, pending, map[string]any{}), 409, "not_blocked", "")
		w.unchanged(t, before, "appeals of items not blocked")

		r = appeal(models.KindPitch, byModel, map[string]any{"note": "  it is a joke  "})
		if r.Status != 201 || r.JSON()["state"] != "pending" || r.JSON()["note"] != "it is a joke" {
			t.Fatalf("appeal: %d %s", r.Status, r.Body)
		}
		before = w.snapshot()
		checkError(t, appeal(models.KindPitch, byModel, map[string]any{}), 409, "appealed", "")
		w.unchanged(t, before, "a second appeal")
		if r := appeal(models.KindRevision, byHand, map[string]any{}); r.Status != 201 {
			t.Fatalf("appeal of the block by hand: %d %s", r.Status, r.Body)
		}
		if a := obj(mineItem(t, w, asAuthor, models.KindPitch, byModel)["appeal"]); a["state"] != "pending" || a["note"] != "it is a joke" || a["decidedAt"] != nil {
			t.Errorf("the author's view of the appeal: %v", a)
		}
		if it := mineItem(t, w, asAuthor, models.KindPitch, allowed); it["appeal"] != nil {
			t.Errorf("an item never appealed shows %v", it["appeal"])
		}
		q := reviewQueue(t, w, "?reason=appeal")
		entries := list(q["entries"])
		if len(entries) != 2 || num(obj(q["counts"])["appeal"]) != 2 {
			t.Fatalf("appeals in the queue: %v", q)
		}
		if e := obj(entries[0]); num(e["id"]) != byModel || e["note"] != "it is a joke" || e["suggestion"] != "block" || e["blockedBy"] != nil {
			t.Errorf("appeal of the model's block: %v", e)
		}
		if e := obj(entries[1]); num(e["id"]) != byHand || num(e["blockedBy"]) != w.uid[asAdmin] {
			t.Errorf("appeal of the block by hand: %v", e)
		}

		// The admin who blocked by hand may not hear its appeal; another may.
		before = w.snapshot()
		checkError(t, w.do(http.MethodPost, verdictPath(models.KindRevision, byHand), asAdmin, map[string]any{"verdict": "allow"}), 409, "same_moderator", "")
		w.unchanged(t, before, "the same moderator's decision")
		r = w.env.Do(http.MethodPost, verdictPath(models.KindRevision, byHand), mod2Tok, map[string]any{"verdict": "allow", "note": "fine on a second look"})
		if r.Status != 200 || r.JSON()["state"] != "public" {
			t.Fatalf("another moderator grants the appeal: %d %s", r.Status, r.Body)
		}
		if s := w.do(http.MethodGet, "/api/songs", asAnon, nil); !strings.Contains(string(s.Body), "Song of author") {
			t.Errorf("the song is not public after the appeal was granted: %s", s.Body)
		}
		// The model's block: any admin, the one who blocked nothing included. Denied: it stays.
		r = w.do(http.MethodPost, verdictPath(models.KindPitch, byModel), asAdmin, map[string]any{"verdict": "block"})
		if r.Status != 200 || r.JSON()["state"] != "blocked" {
			t.Fatalf("deny the appeal: %d %s", r.Status, r.Body)
		}
		if a := obj(mineItem(t, w, asAuthor, models.KindPitch, byModel)["appeal"]); a["state"] != "denied" || a["decidedAt"] == nil {
			t.Errorf("denied appeal as the author sees it: %v", a)
		}
		if a := obj(mineItem(t, w, asAuthor, models.KindRevision, byHand)["appeal"]); a["state"] != "granted" {
			t.Errorf("granted appeal as the author sees it: %v", a)
		}
		if q := reviewQueue(t, w, ""); len(list(q["entries"])) != 0 {
			t.Errorf("queue after both decisions: %v", q)
		}
		// Decided: a third verdict is refused as before.
		checkError(t, w.do(http.MethodPost, verdictPath(models.KindPitch, byModel), asAdmin, map[string]any{"verdict": "allow"}), 409, "decided", "")

		deliver(w)
		var decided, screened []string
		for _, req := range rcv.requests() {
			body := string(req.body)
			switch {
			case strings.Contains(body, `"type":"item.appeal.decided"`):
				decided = append(decided, body)
			case strings.Contains(body, `"type":"item.screened"`):
				screened = append(screened, body)
			}
		}
		if len(decided) != 2 || !strings.Contains(strings.Join(decided, ""), fmt.Sprintf(`"decidedBy":%d`, mod2)) ||
			!strings.Contains(strings.Join(decided, ""), `"outcome":"block"`) {
			t.Errorf("item.appeal.decided deliveries: %v", decided)
		}
		var byMod2 bool
		for _, b := range screened {
			byMod2 = byMod2 || strings.Contains(b, fmt.Sprintf(`"decidedBy":%d`, mod2)) && strings.Contains(b, `"verdict":"allow"`)
		}
		if !byMod2 {
			t.Errorf("item.screened deliveries lack the granted appeal with its decider: %v", screened)
		}
	})
}

// A claim keeps an entry from other moderators for a few minutes, across replicas: of two
// moderators claiming at once on two apps, exactly one gets it; the other's verdict is refused.
func TestReviewClaims(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, reviewBand)
		_, mod2Tok := w.env.User("mod2", models.RoleAdmin)
		other := w.env // a second replica on PostgreSQL; the same process on SQLite
		if !strings.HasPrefix(db, "sqlite:") {
			other = owedtest.NewEnv(t, db, reviewBand)
		}
		w.env.Model.SetVerdict("allow", 0.6)
		var items []int64
		for range 6 {
			items = append(items, w.pitch(asAuthor, ""))
			w.sweep()
			w.env.Clock.Advance(time.Second)
		}
		claim := func(env *owedtest.Env, tok string, id int64) owedtest.Response {
			return env.Do(http.MethodPost, fmt.Sprintf("/api/admin/review/pitch/%d/claim", id), tok, nil)
		}

		r := claim(w.env, w.tok[asAdmin], items[0])
		if r.Status != 200 || !obj(r.JSON()["claim"])["mine"].(bool) {
			t.Fatalf("claim: %d %s", r.Status, r.Body)
		}
		checkError(t, claim(other, mod2Tok, items[0]), 409, "claimed", "")
		before := w.snapshot()
		checkError(t, other.Do(http.MethodPost, verdictPath(models.KindPitch, items[0]), mod2Tok, map[string]any{"verdict": "block"}), 409, "claimed", "")
		w.unchanged(t, before, "a verdict on another moderator's entry")
		q := reviewQueue(t, w, "")
		if c := obj(obj(list(q["entries"])[0])["claim"]); num(c["adminId"]) != w.uid[asAdmin] || c["mine"] != true || c["until"] == nil {
			t.Errorf("the claim as others see it: %v", c)
		}
		// The claimer renews; once the lease runs out, another may claim.
		if r := claim(w.env, w.tok[asAdmin], items[0]); r.Status != 200 {
			t.Errorf("renew: %d %s", r.Status, r.Body)
		}
		w.env.Clock.Advance(models.ReviewClaimFor + time.Second)
		other.Clock.Set(w.env.Clock.Now())
		if r := claim(other, mod2Tok, items[0]); r.Status != 200 {
			t.Errorf("claim after the lease ran out: %d %s", r.Status, r.Body)
		}

		// Two moderators on two replicas at once: one wins each entry.
		for _, id := range items[1:] {
			var wg sync.WaitGroup
			got := make([]int, 2)
			for i, c := range []struct {
				env *owedtest.Env
				tok string
			}{{w.env, w.tok[asAdmin]}, {other, mod2Tok}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i] = claim(c.env, c.tok, id).Status
				}()
			}
			wg.Wait()
			if !(got[0] == 200 && got[1] == 409 || got[0] == 409 && got[1] == 200) {
				t.Errorf("pitch %d claimed at once: %v, want one 200 and one 409", id, got)
			}
		}
	})
}

// The measures after a scripted day of moderation: ten unsure verdicts decided 10 to 100
// minutes after they entered review (three overturned), and two appeals of the model's blocks
// decided after one and three hours (one granted).
func TestReviewMeasuresAfterADay(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, reviewBand).quiet()
		// Before any decision: nothing suggested, so nothing overturned (a share of 0, not 0/0).
		if r := w.do(http.MethodGet, "/api/admin/review/measures", asAdmin, nil); r.Status != 200 || r.JSON()["overturnedShare"] != 0.0 {
			t.Fatalf("measures before any decision: %d %s", r.Status, r.Body)
		}
		w.env.Model.SetVerdict("block", 0.6)
		var unsure []int64
		for range 10 {
			unsure = append(unsure, w.pitch(asAuthor, ""))
		}
		w.sweep()
		decide := func(id int64, verdict string) {
			t.Helper()
			if r := w.do(http.MethodPost, verdictPath(models.KindPitch, id), asAdmin, map[string]any{"verdict": verdict}); r.Status != 200 {
				t.Fatalf("decide pitch %d: %d %s", id, r.Status, r.Body)
			}
		}
		for i, id := range unsure {
			w.env.Clock.Advance(10 * time.Minute)
			verdict := "block"
			if i%3 == 0 && i > 0 { // 3, 6, 9: overturned
				verdict = "allow"
			}
			decide(id, verdict)
		}
		w.env.Model.SetVerdict("block", 0.95)
		a1, a2 := w.pitch(asAuthor, ""), w.pitch(asAuthor, "")
		w.sweep()
		for _, id := range []int64{a1, a2} {
			if r := w.do(http.MethodPost, fmt.Sprintf("/api/listeners/items/pitch/%d/appeal", id), asAuthor, map[string]any{}); r.Status != 201 {
				t.Fatalf("appeal: %d %s", r.Status, r.Body)
			}
		}
		w.env.Clock.Advance(time.Hour)
		decide(a1, "allow")
		w.env.Clock.Advance(2 * time.Hour)
		decide(a2, "block")

		m := w.do(http.MethodGet, "/api/admin/review/measures", asAdmin, nil).JSON()
		p50, p90 := obj(m["p50Seconds"]), obj(m["p90Seconds"])
		if p50["unsure"] != 3000.0 || p90["unsure"] != 5400.0 || p50["appeal"] != 3600.0 || p90["appeal"] != 10800.0 {
			t.Errorf("p50 %v, p90 %v; want unsure 3000 s and 5400 s, appeal 3600 s and 10800 s", p50, p90)
		}
		if num(m["suggested"]) != 12 || num(m["overturned"]) != 4 || num(obj(m["decided"])["unsure"]) != 10 || num(obj(m["decided"])["appeal"]) != 2 {
			t.Errorf("measures = %v", m)
		}
		if share := m["overturnedShare"].(float64); share < 0.333 || share > 0.334 {
			t.Errorf("overturned share = %v, want 4/12", share)
		}
		t.Logf("measures after the day: %v", m)

		metrics := string(w.do(http.MethodGet, "/metrics", asAnon, nil).Body)
		for _, line := range []string{
			`owed_review_decision_seconds{quantile="0.5",reason="unsure"} 3000`,
			`owed_review_decision_seconds{quantile="0.9",reason="unsure"} 5400`,
			`owed_review_decision_seconds{quantile="0.5",reason="appeal"} 3600`,
			`owed_review_decision_seconds{quantile="0.9",reason="appeal"} 10800`,
			`owed_review_open{reason="unsure"} 0`,
			`owed_review_decided{reason="unsure"} 10`,
			`owed_review_overturned_ratio 0.3333333333333333`,
		} {
			if !strings.Contains(metrics, line+"\n") {
				t.Errorf("/metrics lacks %q", line)
			}
		}
	})
}

// Filing and deciding an appeal change the author's view: its ETag, and a held long poll
// wakes with the outcome (on PostgreSQL through the reviews trigger's notification).
func TestAppealWakesTheAuthorsView(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		p := w.pitch(asAuthor, models.VerdictBlock)
		etag := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).Header.Get("ETag")
		if r := w.do(http.MethodPost, fmt.Sprintf("/api/listeners/items/pitch/%d/appeal", p), asAuthor, map[string]any{"note": "hear me"}); r.Status != 201 {
			t.Fatalf("appeal: %d %s", r.Status, r.Body)
		}
		r := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil, "If-None-Match", etag)
		if r.Status != 200 || obj(mineItem(t, w, asAuthor, models.KindPitch, p)["appeal"])["state"] != "pending" {
			t.Fatalf("after the appeal: %d, want 200 with the appeal pending", r.Status)
		}
		etag = r.Header.Get("ETag")
		got := make(chan owedtest.Response, 1)
		go func() {
			got <- w.do(http.MethodGet, "/api/listeners/mine?wait=30", asAuthor, nil, "If-None-Match", etag)
		}()
		wait.Until(t, "the long poll to wait", func() bool { return w.env.App.Notify.Watchers() > 0 })
		if r := w.do(http.MethodPost, verdictPath(models.KindPitch, p), asAdmin, map[string]any{"verdict": "allow"}); r.Status != 200 {
			t.Fatalf("decide: %d %s", r.Status, r.Body)
		}
		select {
		case r := <-got:
			var a map[string]any
			for _, it := range list(r.JSON()["items"]) {
				if num(obj(it)["id"]) == p {
					a = obj(obj(it)["appeal"])
				}
			}
			if r.Status != 200 || a["state"] != "granted" {
				t.Errorf("the long poll answered %d with the appeal %v, want 200 and granted", r.Status, a)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the long poll was not woken by the appeal's decision")
		}
	})
}
