package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// minePage is one page of the author's view as the API answers it.
type minePage struct {
	Items []struct {
		Kind      models.Kind `json:"kind"`
		ID        int64       `json:"id"`
		CreatedAt string      `json:"createdAt"`
		State     string      `json:"state"`
	} `json:"items"`
	NextCursor *string `json:"nextCursor"`
}

func (w *world) minePage(query url.Values) (minePage, owedtest.Response) {
	w.t.Helper()
	r := w.do(http.MethodGet, "/api/listeners/mine?"+query.Encode(), asAuthor, nil)
	if r.Status != http.StatusOK {
		w.t.Fatalf("mine?%s: %d %s", query.Encode(), r.Status, r.Body)
	}
	var p minePage
	r.Decode(w.t, &p)
	return p, r
}

// allPages follows nextCursor from the first page of query to the last, and returns every
// item as "kind/id/state".
func (w *world) allPages(query url.Values) (items []string, pages int) {
	w.t.Helper()
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	for {
		p, _ := w.minePage(q)
		pages++
		for _, it := range p.Items {
			items = append(items, fmt.Sprintf("%s/%d/%s", it.Kind, it.ID, it.State))
		}
		if p.NextCursor == nil {
			return items, pages
		}
		if len(p.Items) == 0 {
			w.t.Fatalf("mine?%s: an empty page with a next cursor", q.Encode())
		}
		q.Set("cursor", *p.NextCursor)
	}
}

// TestMinePagesAndFilters: the view lists every item newest first across kinds (ties by kind,
// then id), in pages of limit (default 100, at most 500) joined by nextCursor without repeat or
// gap, also while items are written; state and kind filter it; no page is silently cut; the
// ETag covers the filters and the page; bad values are 400s naming the parameter.
func TestMinePagesAndFilters(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		ctx := context.Background()
		st := w.store()
		ann := w.uid[asAuthor]
		verdicts := []models.Verdict{"", models.VerdictAllow, models.VerdictBlock}
		// 16 rounds; each writes, at one moment, a revision (a new song), a comment and two
		// pitches, so that kinds and ids tie on createdAt; then the clock moves on.
		for i := range 16 {
			song, rev, err := st.CreateSong(ctx, ann, fmt.Sprintf("song %d", i), "s()")
			if err != nil {
				t.Fatal(err)
			}
			w.screen(models.KindRevision, rev.ID, asAuthor, verdicts[i%3])
			c, err := st.CreateComment(ctx, ann, song.ID, "mine")
			if err != nil {
				t.Fatal(err)
			}
			w.screen(models.KindComment, c.ID, asAuthor, verdicts[(i+1)%3])
			for j := range 2 {
				p, err := st.CreatePitch(ctx, ann, "pitch")
				if err != nil {
					t.Fatal(err)
				}
				w.screen(models.KindPitch, p.ID, asAuthor, verdicts[(i+j+2)%3])
			}
			w.pitch(asOther, models.VerdictAllow) // another author's: never in this view
			w.env.Clock.Advance(time.Duration(1+i%2) * time.Second)
		}
		const total = 16 * 4

		// Every item once, newest first across kinds.
		all, pages := w.allPages(url.Values{"limit": {"500"}})
		if len(all) != total || pages != 1 {
			t.Fatalf("limit=500: %d items in %d pages, want %d in 1", len(all), pages, total)
		}
		p, _ := w.minePage(url.Values{"limit": {"500"}})
		rank := map[models.Kind]int{models.KindRevision: 0, models.KindComment: 1, models.KindPitch: 2}
		for i := 1; i < len(p.Items); i++ {
			a, b := p.Items[i-1], p.Items[i]
			order := b.CreatedAt < a.CreatedAt || (b.CreatedAt == a.CreatedAt &&
				(rank[b.Kind] > rank[a.Kind] || (b.Kind == a.Kind && b.ID < a.ID)))
			if !order {
				t.Fatalf("items %d and %d out of order: %+v then %+v", i-1, i, a, b)
			}
		}
		// The default page is 100; this view has fewer.
		if p, _ := w.minePage(url.Values{}); len(p.Items) != total || p.NextCursor != nil {
			t.Fatalf("the default page: %d items, next %v", len(p.Items), p.NextCursor)
		}

		// Pages of any size join up to the whole.
		for _, limit := range []int{1, 3, 7, 64, 65} {
			got, pages := w.allPages(url.Values{"limit": {fmt.Sprint(limit)}})
			if !slices.Equal(got, all) {
				t.Fatalf("limit=%d: pages joined to %v, want %v", limit, got, all)
			}
			if want := (total + limit - 1) / limit; pages != want && !(total%limit == 0 && pages == want+1) {
				t.Errorf("limit=%d: %d pages, want %d", limit, pages, want)
			}
		}

		// Filters: the same items as filtering the whole, in the same order, in any page size.
		for _, f := range []url.Values{
			{"state": {"pending"}}, {"state": {"public"}}, {"state": {"blocked"}},
			{"kind": {"revision"}}, {"kind": {"comment"}}, {"kind": {"pitch"}},
			{"state": {"blocked"}, "kind": {"pitch"}}, {"state": {"public"}, "kind": {"comment"}},
		} {
			var want []string
			for _, it := range all {
				parts := strings.SplitN(it, "/", 3) // kind/id/state
				kind, state := parts[0], parts[2]
				if (f.Get("state") == "" || f.Get("state") == state) && (f.Get("kind") == "" || f.Get("kind") == kind) {
					want = append(want, it)
				}
			}
			if len(want) == 0 {
				t.Fatalf("%v selects nothing: a weak test", f)
			}
			for _, limit := range []string{"2", "500"} {
				q := url.Values{"limit": {limit}}
				for k, v := range f {
					q[k] = v
				}
				if got, _ := w.allPages(q); !slices.Equal(got, want) {
					t.Fatalf("%s: %v, want %v", q.Encode(), got, want)
				}
			}
		}

		// Paging while the author writes: a new item comes before the first page, so the pages
		// after it neither repeat nor skip.
		first, _ := w.minePage(url.Values{"limit": {"10"}})
		w.pitch(asAuthor, "")
		rest, _ := w.allPages(url.Values{"limit": {"10"}, "cursor": {*first.NextCursor}})
		if !slices.Equal(rest, all[10:]) {
			t.Fatalf("after a write between pages: %v, want %v", rest, all[10:])
		}

		// No silent cap: more than 500 of one kind page on past 500.
		for range 540 - 2*16 {
			if _, err := st.CreatePitch(ctx, ann, "more"); err != nil {
				t.Fatal(err)
			}
		}
		if p, _ := w.minePage(url.Values{"kind": {"pitch"}}); len(p.Items) != 100 || p.NextCursor == nil {
			t.Fatalf("the default page of 541 pitches: %d items, next %v", len(p.Items), p.NextCursor)
		}
		big, _ := w.minePage(url.Values{"kind": {"pitch"}, "limit": {"500"}})
		if len(big.Items) != 500 || big.NextCursor == nil {
			t.Fatalf("500 of 541 pitches: %d items, next %v", len(big.Items), big.NextCursor)
		}
		if tail, _ := w.minePage(url.Values{"kind": {"pitch"}, "limit": {"500"}, "cursor": {*big.NextCursor}}); len(tail.Items) != 41 || tail.NextCursor != nil {
			t.Fatalf("after 500 of 541 pitches: %d items, next %v", len(tail.Items), tail.NextCursor)
		}

		// The ETag covers the filters and the page.
		tags := map[string]string{}
		for _, q := range []string{"", "state=public", "state=blocked", "kind=pitch", "limit=5", "limit=5&cursor=" + *first.NextCursor} {
			r := w.do(http.MethodGet, "/api/listeners/mine?"+q, asAuthor, nil)
			tag := r.Header.Get("ETag")
			if other, ok := tags[tag]; ok {
				t.Errorf("?%s and ?%s share the ETag %s", q, other, tag)
			}
			tags[tag] = q
			if again := w.do(http.MethodGet, "/api/listeners/mine?"+q, asAuthor, nil, "If-None-Match", tag); again.Status != http.StatusNotModified {
				t.Errorf("?%s with its own ETag: %d, want 304", q, again.Status)
			}
		}
		plain := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).Header.Get("ETag")
		if r := w.do(http.MethodGet, "/api/listeners/mine?state=public", asAuthor, nil, "If-None-Match", plain); r.Status != http.StatusOK {
			t.Errorf("a filtered view with the unfiltered ETag: %d, want 200", r.Status)
		}

		// Bad values.
		cursor := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
		for _, c := range []struct{ query, field string }{
			{"state=PENDING", "state"}, {"state=deleted", "state"}, {"kind=song", "kind"},
			{"limit=0", "limit"}, {"limit=501", "limit"}, {"limit=ten", "limit"}, {"limit=-1", "limit"},
			{"cursor=!!!", "cursor"}, {"cursor=" + cursor(`{"t":1,"k":"song","i":1}`), "cursor"},
			{"cursor=" + cursor(`{"t":1,"k":"pitch","i":0}`), "cursor"}, {"cursor=" + cursor(`[1]`), "cursor"},
			{"state=public&state=blocked", "state"}, {"kind=pitch&kind=comment", "kind"},
		} {
			r := w.do(http.MethodGet, "/api/listeners/mine?"+c.query, asAuthor, nil)
			checkError(t, r, http.StatusBadRequest, "invalid", c.field)
			r = w.do(http.MethodGet, "/api/listeners/mine/stream?"+c.query, asAuthor, nil)
			checkError(t, r, http.StatusBadRequest, "invalid", c.field)
		}
	})
}

// TestMineAnswersStayTheirOwnUnderConcurrentViews: many views at once, of two authors and
// pages of four sizes, each built or taken from the kept answers into a buffer that is reused
// as soon as it is written out: every answer of a view is the same, byte for byte, and the one
// asked for alone afterwards (under -race, a buffer reused while still read is also a race).
func TestMineAnswersStayTheirOwnUnderConcurrentViews(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		for i := range 12 {
			w.pitch(asAuthor, "")
			w.pitch(asOther, models.VerdictAllow)
			if i%3 == 0 {
				w.song(asAuthor, models.VerdictAllow)
			}
		}
		type view struct {
			as   role
			path string
		}
		var views []view
		for _, as := range []role{asAuthor, asOther} {
			for _, limit := range []string{"1", "2", "5", "100"} {
				views = append(views, view{as, "/api/listeners/mine?limit=" + limit})
			}
		}
		var (
			mu  sync.Mutex
			got = map[view][][]byte{}
			wg  sync.WaitGroup
		)
		for g := range 8 {
			wg.Go(func() {
				for i := range 40 {
					v := views[(g*5+i)%len(views)]
					r, err := owedtest.Call(w.env.Server.Client(), w.env.Server.URL, http.MethodGet, v.path, w.tok[v.as], nil)
					if err != nil || r.Status != http.StatusOK {
						t.Errorf("%s as %s: %d, %v", v.path, v.as, r.Status, err)
						return
					}
					mu.Lock()
					got[v] = append(got[v], r.Body)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for _, v := range views {
			alone := w.do(http.MethodGet, v.path, v.as, nil)
			if alone.Status != http.StatusOK || len(got[v]) == 0 {
				t.Fatalf("%s as %s: %d alone, %d answers at once", v.path, v.as, alone.Status, len(got[v]))
			}
			for _, body := range got[v] {
				if !bytes.Equal(body, alone.Body) {
					t.Fatalf("%s as %s: an answer at once differs from the one alone:\n%s\n%s", v.path, v.as, body, alone.Body)
				}
			}
		}
	})
}
