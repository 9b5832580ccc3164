package models_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// While the breaker is open the jobs it puts off (due by its next probe, or with no why of their
// own, which the breaker parks untried) are counted under why breaker only: why upstream and
// why none leave them out, and the unfiltered count still has every job.
func TestJobFilterBreakerDeferredLeavesOtherWhys(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		pitch := func(body string) int64 {
			return f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, body, f.NowMs())
		}
		probe := f.clk.Now().Add(5 * time.Second)
		backingOff, putOff, untried, later := pitch("backing off"), pitch("put off"), pitch("untried"), pitch("later")
		f.Exec(`UPDATE content_jobs SET why = 'upstream', due_at = ? WHERE item_id = ?`, ms(f.clk.Now().Add(time.Minute)), backingOff)
		f.Exec(`UPDATE content_jobs SET why = 'upstream', due_at = ? WHERE item_id = ?`, f.NowMs(), putOff)
		f.Exec(`UPDATE content_jobs SET due_at = ? WHERE item_id = ?`, ms(f.clk.Now().Add(time.Hour)), later)
		_ = untried // due now with no why, as later (due in an hour): both parked by the breaker
		for why, want := range map[models.Why]int64{models.WhyBreaker: 3, models.WhyUpstream: 1, "none": 0, "": 4} {
			if n, err := f.store.CountJobs(f.ctx, models.JobFilter{Kind: models.KindPitch, Why: why, Deferred: &probe}); err != nil || n != want {
				t.Errorf("breaker open: why %q counts %d (%v), want %d", why, n, err, want)
			}
		}
	})
}

// The admin's filter by author matches part of the name in any case, and takes % and _ as
// themselves: only that author's jobs are counted.
func TestJobFilterByAuthor(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		for _, name := range []string{"Annabel", "bob_100", "bobX100"} {
			id := f.User(name)
			f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, id, "by "+name, f.NowMs())
		}
		for author, want := range map[string]int64{"NNAB": 1, "b_1": 1, "bob": 2, "%": 0, "": 3} {
			if n, err := f.store.CountJobs(f.ctx, models.JobFilter{Author: author}); err != nil || n != want {
				t.Errorf("author %q counts %d jobs (%v), want %d", author, n, err, want)
			}
		}
	})
}

// The admin's job list names each job's author and item: a revision's title and song, a
// comment's first 80 characters and song, a pitch's first 80 characters (no song), and its
// last error.
func TestListJobRowsNameTheItem(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("Ann")
		song, rev := f.rawSong(ann, "Tide", `s("bd")`)
		long := strings.Repeat("x", 79) + "yz"
		comment := f.InsertID(`INSERT INTO comments (song_id, user_id, body, created_at) VALUES (?, ?, ?, ?)`, song, ann, long, f.NowMs())
		pitch := f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, "a pitch", f.NowMs())
		f.Exec(`UPDATE content_jobs SET last_error = 'HTTP 503' WHERE kind = 'pitch'`)
		rows, err := f.store.ListJobRows(f.ctx, models.JobFilter{Task: models.TaskScreen}, models.JobsByID, nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		want := map[models.Kind]struct {
			id     int64
			title  string
			song   *int64
			errorS string
		}{
			models.KindRevision: {rev, "Tide", &song, ""},
			models.KindComment:  {comment, long[:80], &song, ""},
			models.KindPitch:    {pitch, "a pitch", nil, "HTTP 503"},
		}
		if len(rows) != len(want) {
			t.Fatalf("%d rows, want %d", len(rows), len(want))
		}
		for _, r := range rows {
			w := want[r.Kind]
			if r.ItemID != w.id || r.UserName != "Ann" || r.ItemTitle == nil || *r.ItemTitle != w.title ||
				(r.SongID == nil) != (w.song == nil) || (w.song != nil && *r.SongID != *w.song) ||
				(w.errorS == "") != (r.LastError == nil) || (r.LastError != nil && *r.LastError != w.errorS) {
				t.Errorf("%s row: item %d, user %q, title %v, song %v, last error %v; want item %d, Ann, %q, song %v, %q",
					r.Kind, r.ItemID, r.UserName, str(r.ItemTitle), r.SongID, str(r.LastError), w.id, w.title, w.song, w.errorS)
			}
		}
	})
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// The admin's job list pages in each order without a job twice or missed, ties on the sort
// key broken by id: by id, soonest due first, most attempts first.
func TestListJobRowsPagesInEveryOrder(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		// due in seconds and attempts per pitch: ties on both keys, neither order the ids'.
		shape := []struct{ due, attempts int }{{30, 1}, {10, 4}, {30, 4}, {20, 0}, {10, 1}, {40, 2}, {20, 4}}
		var ids []int64
		for i, s := range shape {
			id := f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, fmt.Sprint("p", i), f.NowMs())
			f.Exec(`UPDATE content_jobs SET due_at = ?, attempts = ? WHERE item_id = ?`, ms(f.clk.Now().Add(time.Duration(s.due)*time.Second)), s.attempts, id)
			ids = append(ids, id)
		}
		idx := make([]int, len(shape))
		for i := range idx {
			idx[i] = i
		}
		for order, less := range map[string]func(a, b int) bool{
			models.JobsByID:  func(a, b int) bool { return a < b },
			models.JobsByDue: func(a, b int) bool { return shape[a].due < shape[b].due || shape[a].due == shape[b].due && a < b },
			models.JobsByAttempts: func(a, b int) bool {
				return shape[a].attempts > shape[b].attempts || shape[a].attempts == shape[b].attempts && a < b
			},
		} {
			sort.SliceStable(idx, func(i, j int) bool { return less(idx[i], idx[j]) })
			var want, got []int64
			for _, i := range idx {
				want = append(want, ids[i])
			}
			var after *models.JobCursor
			for page := 0; page < 10; page++ {
				rows, err := f.store.ListJobRows(f.ctx, models.JobFilter{Kind: models.KindPitch}, order, after, 2)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					got = append(got, r.ItemID)
				}
				if len(rows) < 2 {
					break
				}
				c := rows[len(rows)-1].Cursor(order)
				after = &c
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("order %s in pages of 2: %v, want %v", order, got, want)
			}
		}
	})
}
