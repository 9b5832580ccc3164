package api_test

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// publicSongIDs lists the ids GET /api/songs shows the caller.
func (w *world) publicSongIDs(as role, query string) []int64 {
	w.t.Helper()
	r := w.do(http.MethodGet, "/api/songs"+query, as, nil)
	if r.Status != http.StatusOK {
		w.t.Fatalf("songs: %d %s", r.Status, r.Body)
	}
	var ids []int64
	for _, s := range list(r.JSON()["songs"]) {
		ids = append(ids, num(obj(s)["id"]))
	}
	return ids
}

// TestBlockedAndPendingItemsAreTheAuthorsAlone: only allowed items are public; a blocked or
// pending one is seen by its author alone, in their own view, with its verdict or its why.
func TestBlockedAndPendingItemsAreTheAuthorsAlone(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		m := w.env.Model
		publish := func(title string) (int64, int64, string) {
			r := w.created("/api/listeners/songs", asAuthor, map[string]string{"title": title, "code": `s("bd")`})
			return num(obj(r["song"])["id"]), num(obj(r["revision"])["id"]), obj(r["screen"])["state"].(string)
		}
		public, publicRev, st := publish("Public")
		if st != "public" {
			t.Fatalf("allowed song: %s", st)
		}
		w.scored(publicRev)
		m.SetVerdict("block", 0.9)
		blocked, _, st := publish("Blocked")
		if st != "blocked" {
			t.Fatalf("blocked song: %s", st)
		}
		// A blocked revision of a public song: the song stays public, the revision is hidden.
		hiddenRev := num(obj(w.created(fmt.Sprintf("/api/listeners/songs/%d/revisions", public), asAuthor, map[string]string{"code": "x"})["revision"])["id"])
		blockedPitch := num(obj(w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "blocked pitch"})["pitch"])["id"])
		blockedComment := num(obj(w.created(fmt.Sprintf("/api/listeners/songs/%d/comments", public), asOther, map[string]string{"body": "rude"})["comment"])["id"])
		m.Fail(http.StatusServiceUnavailable, nil)
		pending, _, st := publish("Pending")
		if st != "pending" {
			t.Fatalf("pending song: %s", st)
		}
		pendingPitch := num(obj(w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "pending pitch"})["pitch"])["id"])
		m.Reset()
		allowedPitch := num(obj(w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "allowed pitch"})["pitch"])["id"])
		allowedComment := num(obj(w.created(fmt.Sprintf("/api/listeners/songs/%d/comments", public), asOther, map[string]string{"body": "nice"})["comment"])["id"])

		for _, as := range everyRole {
			if got := w.publicSongIDs(as, ""); !slices.Equal(got, []int64{public}) {
				t.Errorf("songs seen by %s: %v, want only the public one %d", as, got, public)
			}
			for _, id := range []int64{blocked, pending} {
				r := w.do(http.MethodGet, fmt.Sprintf("/api/songs/%d", id), as, nil)
				checkError(t, r, http.StatusNotFound, "not_found", "")
			}
			r := w.do(http.MethodGet, fmt.Sprintf("/api/songs/%d", public), as, nil)
			detail := r.JSON()
			var revs, comments []int64
			for _, x := range list(detail["revisions"]) {
				revs = append(revs, num(obj(x)["id"]))
			}
			for _, x := range list(detail["comments"]) {
				comments = append(comments, num(obj(x)["id"]))
			}
			if !slices.Equal(revs, []int64{publicRev}) || !slices.Equal(comments, []int64{allowedComment}) {
				t.Errorf("song %d seen by %s: revisions %v, comments %v; want only allowed ones (%d, %d)",
					public, as, revs, comments, publicRev, allowedComment)
			}
			var pitches []int64
			for _, p := range list(w.do(http.MethodGet, "/api/pitches", as, nil).JSON()["pitches"]) {
				pitches = append(pitches, num(obj(p)["id"]))
			}
			if !slices.Equal(pitches, []int64{allowedPitch}) {
				t.Errorf("pitches seen by %s: %v, want only %d", as, pitches, allowedPitch)
			}
		}

		// The author sees everything of theirs, with where it stands.
		states := map[string]string{}
		for _, it := range list(w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()["items"]) {
			states[fmt.Sprintf("%s %d", obj(it)["kind"], num(obj(it)["id"]))] = obj(it)["state"].(string)
		}
		for item, want := range map[string]string{
			fmt.Sprintf("revision %d", hiddenRev): "blocked",
			fmt.Sprintf("pitch %d", blockedPitch): "blocked",
			fmt.Sprintf("pitch %d", pendingPitch): "pending",
			fmt.Sprintf("pitch %d", allowedPitch): "public",
			fmt.Sprintf("revision %d", publicRev): "public",
		} {
			if states[item] != want {
				t.Errorf("the author's %s: %q, want %q", item, states[item], want)
			}
		}
		// …and another author sees none of it, but their own blocked comment.
		theirs := list(w.do(http.MethodGet, "/api/listeners/mine", asOther, nil).JSON()["items"])
		if len(theirs) != 2 {
			t.Errorf("ben's view: %v, want his two comments only", theirs)
		}
		for _, it := range theirs {
			if id := num(obj(it)["id"]); obj(it)["kind"] != "comment" || (id != blockedComment && id != allowedComment) {
				t.Errorf("ben's view holds %v", it)
			}
		}

		// Commenting needs a song one can see: another author's blocked or pending song is
		// not found, and nothing is written; one's own is fine.
		for _, id := range []int64{blocked, pending} {
			before := w.snapshot()
			r := w.do(http.MethodPost, fmt.Sprintf("/api/listeners/songs/%d/comments", id), asOther, map[string]string{"body": "hi"})
			checkError(t, r, http.StatusNotFound, "not_found", "")
			w.unchanged(t, before, "a comment on a hidden song")
		}
		w.created(fmt.Sprintf("/api/listeners/songs/%d/comments", blocked), asAuthor, map[string]string{"body": "note to self"})
	})
}

// TestSongsByArtPageWithoutRepeatsOrSkips: public songs sort by art, best first, ties newest
// first, unscored songs last; paging with any limit walks that order exactly.
func TestSongsByArtPageWithoutRepeatsOrSkips(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		arts := map[int64]float64{}
		for i, art := range []float64{0.3, 0.9, 0.5, 0.7, 0.5, 0.1, 0.8} {
			w.env.Model.SetArt(func(int) modelclient.ArtRun {
				return modelclient.ArtRun{Art: art, Criteria: map[string]float64{"melody": art}}
			})
			r := w.created("/api/listeners/songs", asAuthor, map[string]string{"title": fmt.Sprintf("Song %d", i), "code": fmt.Sprintf("s(%d)", i)})
			w.scored(num(obj(r["revision"])["id"]))
			arts[num(obj(r["song"])["id"])] = art
		}
		// Two songs whose score fails: public, but unscored.
		w.env.Model.Handle(func(rw http.ResponseWriter, r *http.Request) bool {
			b, _ := io.ReadAll(r.Body)
			if strings.Contains(string(b), `"task":"score"`) {
				rw.WriteHeader(http.StatusServiceUnavailable)
				return true
			}
			return false
		})
		var unscored []int64
		for i := range 2 {
			r := w.created("/api/listeners/songs", asOther, map[string]string{"title": fmt.Sprintf("Unscored %d", i), "code": "s()"})
			unscored = append(unscored, num(obj(r["song"])["id"]))
		}
		wait.Until(t, "the failed scores", func() bool {
			jobs := list(w.do(http.MethodGet, "/api/admin/jobs?task=score&why=upstream", asAdmin, nil).JSON()["jobs"])
			return len(jobs) == 2
		})

		var want []int64
		for id := range arts {
			want = append(want, id)
		}
		slices.SortFunc(want, func(a, b int64) int {
			if arts[a] != arts[b] {
				if arts[a] > arts[b] {
					return -1
				}
				return 1
			}
			return int(b - a)
		})
		want = append(want, unscored[1], unscored[0])

		all := list(w.do(http.MethodGet, "/api/songs", asAnon, nil).JSON()["songs"])
		for i, s := range all {
			id := num(obj(s)["id"])
			if art, _ := obj(s)["art"].(float64); i < len(arts) && math.Abs(art-arts[id]) > 1e-9 {
				t.Errorf("song %d: art %v, want %v", id, obj(s)["art"], arts[id])
			}
			if i >= len(arts) && obj(s)["art"] != nil {
				t.Errorf("unscored song %d: art %v, want null", id, obj(s)["art"])
			}
		}
		for _, path := range []string{"/api/songs", "/api/songs?sort=art"} {
			for _, limit := range []int{1, 2, 3, 4, 8, 9, 10} {
				got := w.pages(t, path, "songs", limit)
				if !slices.Equal(got, want) {
					t.Errorf("%s limit %d: %v, want %v", path, limit, got, want)
				}
			}
		}
		newest := slices.Clone(want)
		slices.Sort(newest)
		slices.Reverse(newest)
		for _, limit := range []int{1, 4, 9} {
			if got := w.pages(t, "/api/songs?sort=new", "songs", limit); !slices.Equal(got, newest) {
				t.Errorf("sort=new limit %d: %v, want %v", limit, got, newest)
			}
		}
	})
}

// pages follows nextCursor from the first page to the last and returns the ids in order,
// failing on a repeat.
func (w *world) pages(t *testing.T, path, key string, limit int) []int64 {
	t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	var ids []int64
	cursor := ""
	for page := 0; ; page++ {
		if page > 100 {
			t.Fatalf("%s: more than 100 pages", path)
		}
		q := fmt.Sprintf("%s%slimit=%d", path, sep, limit)
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		r := w.do(http.MethodGet, q, asAdmin, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", q, r.Status, r.Body)
		}
		body := r.JSON()
		items := list(body[key])
		if len(items) > limit {
			t.Fatalf("%s: %d items, more than the limit", q, len(items))
		}
		for _, it := range items {
			id := num(obj(it)["id"])
			if slices.Contains(ids, id) {
				t.Fatalf("%s: %d again", q, id)
			}
			ids = append(ids, id)
		}
		next, _ := body["nextCursor"].(string)
		if next == "" {
			return ids
		}
		cursor = next
	}
}

// TestPitchesNewestFirst: public pitches page newest first.
func TestPitchesNewestFirst(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		var want []int64
		for i := range 5 {
			verdict := models.VerdictAllow
			if i == 2 {
				verdict = models.VerdictBlock
			}
			id := w.pitch(asAuthor, verdict)
			if verdict == models.VerdictAllow {
				want = append([]int64{id}, want...)
			}
		}
		w.pitch(asOther, "") // pending
		for _, limit := range []int{1, 2, 4, 5} {
			if got := w.pages(t, "/api/pitches", "pitches", limit); !slices.Equal(got, want) {
				t.Errorf("limit %d: %v, want %v", limit, got, want)
			}
		}
		p := obj(list(w.do(http.MethodGet, "/api/pitches", asAnon, nil).JSON()["pitches"])[0])
		hasKeys(t, "pitch", p, "id", "userId", "body", "createdAt")
		isTime(t, "createdAt", p["createdAt"])
	})
}

// TestMineETag: the author's view answers 304 while nothing changed, and a new ETag after.
func TestMineETag(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		w.created("/api/listeners/songs", asAuthor, map[string]string{"title": "Tide", "code": "s()"})
		r := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil)
		etag := r.Header.Get("ETag")
		if r.Status != http.StatusOK || etag == "" || !strings.HasPrefix(etag, `"`) {
			t.Fatalf("mine: %d, ETag %q", r.Status, etag)
		}
		if cc := r.Header.Get("Cache-Control"); !strings.Contains(cc, "private") {
			t.Errorf("Cache-Control %q: an author's view must not sit in a shared cache", cc)
		}
		for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag} {
			r = w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil, "If-None-Match", inm)
			if r.Status != http.StatusNotModified || len(r.Body) != 0 || r.Header.Get("ETag") != etag {
				t.Errorf("If-None-Match %s: %d %q, ETag %q; want 304, no body, the same ETag", inm, r.Status, r.Body, r.Header.Get("ETag"))
			}
		}
		// Another author with the same ETag gets their own view.
		if r = w.do(http.MethodGet, "/api/listeners/mine", asOther, nil, "If-None-Match", etag); r.Status != http.StatusOK {
			t.Errorf("another author's view: %d, want 200", r.Status)
		}

		w.sweep() // the song is screened and scored
		r = w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil, "If-None-Match", etag)
		if r.Status != http.StatusOK || r.Header.Get("ETag") == etag || r.Header.Get("ETag") == "" {
			t.Fatalf("after the screen: %d, ETag %q (was %q); want 200 and a new ETag", r.Status, r.Header.Get("ETag"), etag)
		}
		etag = r.Header.Get("ETag")
		w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "pitch"})
		if r = w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil, "If-None-Match", etag); r.Status != http.StatusOK {
			t.Errorf("after a new pitch: %d, want 200", r.Status)
		}
		// The budget is part of the view: a new day resets it, and the ETag with it.
		etag = r.Header.Get("ETag")
		w.env.Clock.Advance(24 * time.Hour)
		if r = w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil, "If-None-Match", etag); r.Status != http.StatusOK {
			t.Errorf("on a new day: %d, want 200", r.Status)
		}
	})
}

// TestMineRunsTheAuthorsDueJobsWithoutWaiting: the author's view starts their due jobs in the
// background and answers at once, even while the model is slow.
func TestMineRunsTheAuthorsDueJobsWithoutWaiting(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		w.env.Model.Fail(http.StatusServiceUnavailable, nil)
		pitch := num(obj(w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "pitch"})["pitch"])["id"])
		w.env.Model.Reset()
		release := make(chan struct{})
		w.env.Model.Handle(func(_ http.ResponseWriter, r *http.Request) bool {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return false
		})
		w.env.Clock.Advance(time.Minute) // the pitch's next attempt is due

		answered := make(chan owedtest.Response, 1)
		go func() { answered <- w.env.Do(http.MethodGet, "/api/listeners/mine", w.tok[asAuthor], nil) }()
		select {
		case r := <-answered:
			if items := list(r.JSON()["items"]); r.Status != http.StatusOK || len(items) != 1 || obj(items[0])["state"] != "pending" {
				t.Errorf("mine while the model works: %d %s", r.Status, r.Body)
			}
		case <-time.After(5 * time.Second):
			close(release)
			t.Fatal("mine waited for the model")
		}
		close(release)
		wait.Until(t, "the pitch's verdict", func() bool {
			for _, it := range list(w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()["items"]) {
				if num(obj(it)["id"]) == pitch && obj(it)["state"] == "public" {
					return true
				}
			}
			return false
		})
	})
}

// TestRevisionTitleIsPublicOnlyOnceAllowed: a revision's new title is the song's public title
// only once that revision is allowed; a blocked or pending one shows nowhere but to its author.
func TestRevisionTitleIsPublicOnlyOnceAllowed(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		r := w.created("/api/listeners/songs", asAuthor, map[string]string{"title": "Tide", "code": "s(1)"})
		song := num(obj(r["song"])["id"])
		w.scored(num(obj(r["revision"])["id"]))
		title := func() (inList, inDetail any) {
			songs := list(w.do(http.MethodGet, "/api/songs", asAnon, nil).JSON()["songs"])
			d := w.do(http.MethodGet, fmt.Sprintf("/api/songs/%d", song), asAnon, nil).JSON()
			if len(songs) != 1 {
				t.Fatalf("songs: %v", songs)
			}
			return obj(songs[0])["title"], obj(d["song"])["title"]
		}

		w.env.Model.SetVerdict("block", 0.9)
		w.created(fmt.Sprintf("/api/listeners/songs/%d/revisions", song), asAuthor, map[string]string{"title": "Something rude", "code": "s(2)"})
		w.env.Model.Fail(http.StatusServiceUnavailable, nil)
		w.created(fmt.Sprintf("/api/listeners/songs/%d/revisions", song), asAuthor, map[string]string{"title": "Not screened yet", "code": "s(3)"})
		if l, d := title(); l != "Tide" || d != "Tide" {
			t.Errorf("public title %v / %v, want the allowed revision's Tide", l, d)
		}

		w.env.Model.Reset()
		r = w.created(fmt.Sprintf("/api/listeners/songs/%d/revisions", song), asAuthor, map[string]string{"title": "Tide (remix)", "code": "s(4)"})
		if obj(r["screen"])["state"] != "public" {
			t.Fatalf("revision: %v", r)
		}
		if l, d := title(); l != "Tide (remix)" || d != "Tide (remix)" {
			t.Errorf("public title %v / %v, want the newly allowed Tide (remix)", l, d)
		}
		// The pending revision allowed later, but an older one: the newest allowed title stays.
		w.env.Clock.Advance(time.Minute)
		w.env.Sweep()
		if l, d := title(); l != "Tide (remix)" || d != "Tide (remix)" {
			t.Errorf("public title %v / %v after an older revision's verdict, want Tide (remix)", l, d)
		}
		// The newest allowed revision deleted: the title is the newest allowed one left.
		remix := num(obj(r["revision"])["id"])
		if del := w.do(http.MethodDelete, fmt.Sprintf("/api/listeners/revisions/%d", remix), asAuthor, nil); del.Status != http.StatusNoContent {
			t.Fatalf("delete the remix: %d %s", del.Status, del.Body)
		}
		if l, d := title(); l != "Not screened yet" || d != "Not screened yet" {
			t.Errorf("public title %v / %v after deleting the newest allowed revision, want Not screened yet", l, d)
		}
	})
}

// TestDeleteTakesTheOwedJobs: deleting an item takes its owed jobs (and its song's, for a
// song) with it, and it leaves the author's view and the public lists.
func TestDeleteTakesTheOwedJobs(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		song, rev := w.song(asAuthor, models.VerdictAllow) // owes its score
		comment := w.comment(asOther, song, "")            // owes its screen
		loneSong, lone := w.song(asAuthor, "")
		pitch := w.pitch(asAuthor, "")
		if n := len(w.listedJobs(t, "")); n != 4 {
			t.Fatalf("jobs before: %d, want 4", n)
		}
		for _, path := range []string{
			fmt.Sprintf("/api/listeners/songs/%d", song),
			fmt.Sprintf("/api/listeners/revisions/%d", lone),
			fmt.Sprintf("/api/listeners/pitches/%d", pitch),
		} {
			if r := w.do(http.MethodDelete, path, asAuthor, nil); r.Status != http.StatusNoContent || len(r.Body) != 0 {
				t.Errorf("DELETE %s: %d %s", path, r.Status, r.Body)
			}
			checkError(t, w.do(http.MethodDelete, path, asAuthor, nil), http.StatusNotFound, "not_found", "")
		}
		if jobs := w.listedJobs(t, ""); len(jobs) != 0 {
			t.Errorf("jobs left: %v (revision %d, comment %d)", jobs, rev, comment)
		}
		if items := list(w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()["items"]); len(items) != 0 {
			t.Errorf("the author's view still holds %v", items)
		}
		if ids := w.publicSongIDs(asAnon, ""); len(ids) != 0 {
			t.Errorf("public songs after the delete: %v", ids)
		}
		// The song's only revision gone, the song went with it.
		checkError(t, w.do(http.MethodPost, fmt.Sprintf("/api/listeners/songs/%d/revisions", loneSong), asAuthor, map[string]string{"code": "x"}), http.StatusNotFound, "not_found", "")
	})
}
