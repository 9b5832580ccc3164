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

// The shown why has one home (models.ShownWhy): the admin's filter by why (its SQL form) lists
// exactly the jobs ShownWhy shows with that why, and DeferredByWhy counts exactly those it
// shows as breaker (and, of the held, those it would show as breaker once lifted), for every
// hold and with the breaker closed or open, over jobs of every why, leased or not, due before
// the breaker's probe or after.
func TestShownWhyInSQLAgreesWithGo(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		now := f.clk.Now()
		for _, title := range []string{"a", "b", "c"} { // their screens allowed: a score owed each
			_, rev := f.rawSong(ann, title, `s("bd")`)
			if ok, err := f.store.RecordScreen(f.ctx, models.KindRevision, rev, models.VerdictAllow, 0.9,
				models.Event{Event: models.TaskScreen, Kind: models.KindRevision, ItemID: rev, UserID: ann, Outcome: models.OutcomeAllow}); err != nil || !ok {
				t.Fatalf("record: %v %v", ok, err)
			}
		}
		for i := range 12 {
			f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, fmt.Sprint("p", i), f.NowMs())
		}
		// Each job a why (or none), a due time before the probe or after, and a lease or none.
		whys := []any{nil, "upstream", "budget", "review", "unreachable"}
		dues := []time.Time{now.Add(-time.Minute), now.Add(time.Hour)}
		leases := []any{nil, ms(now.Add(time.Minute)), ms(now.Add(-time.Minute))}
		var ids []int64
		if err := f.store.RawScan(f.ctx, &ids, `SELECT id FROM content_jobs ORDER BY id`); err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			why, due, lease := whys[i%len(whys)], dues[i/len(whys)%len(dues)], leases[i%len(leases)]
			if why == "review" {
				due = models.ReviewDue
			}
			f.Exec(`UPDATE content_jobs SET why = ?, due_at = ?, lease_until = ?, lease_owner = 'w' WHERE id = ?`, why, ms(due), lease, id)
		}
		probe := now.Add(5 * time.Second)
		for _, h := range []models.Holds{{}, {Screen: true}, {Score: true}, {Screen: true, Score: true}} {
			if err := f.store.SetHolds(f.ctx, h, 1); err != nil {
				t.Fatal(err)
			}
			for _, deferred := range []*time.Time{nil, &probe} {
				all, err := f.store.ListJobRows(f.ctx, models.JobFilter{}, models.JobsByID, nil, 1000)
				if err != nil || len(all) != len(ids) {
					t.Fatalf("all jobs: %d, %v", len(all), err)
				}
				want := map[models.Why][]int64{}
				deferredByWhy := map[models.Why]int64{}
				heldDeferredByWhy := map[models.Why]int64{}
				for _, j := range all {
					w := models.Why("none")
					if shown := models.ShownWhy(h, deferred, &j.Job, now); shown != nil {
						w = *shown
					}
					want[w] = append(want[w], j.ID)
					own := models.Why("none")
					if j.Why != nil {
						own = *j.Why
					}
					if w == models.WhyBreaker {
						deferredByWhy[own]++
					}
					// A held job the breaker would put off once its hold is lifted.
					if unheld := models.ShownWhy(models.Holds{}, deferred, &j.Job, now); w == models.WhyHeld && unheld != nil && *unheld == models.WhyBreaker {
						heldDeferredByWhy[own]++
					}
				}
				for _, why := range append([]models.Why{"none"}, models.Whys...) {
					for _, held := range []*models.Holds{nil, &h} {
						rows, err := f.store.ListJobRows(f.ctx, models.JobFilter{Why: why, Deferred: deferred, Held: held}, models.JobsByID, nil, 1000)
						if err != nil {
							t.Fatal(err)
						}
						var got []int64
						for _, r := range rows {
							got = append(got, r.ID)
						}
						if fmt.Sprint(got) != fmt.Sprint(want[why]) {
							t.Errorf("holds %+v, breaker until %v, holds known %v: why %s lists %v, ShownWhy shows %v",
								h, deferred, held != nil, why, got, want[why])
						}
					}
				}
				if deferred != nil {
					got, err := f.store.DeferredByWhy(f.ctx, *deferred, false)
					if err != nil || fmt.Sprint(got) != fmt.Sprint(deferredByWhy) {
						t.Errorf("holds %+v: DeferredByWhy %v (%v), ShownWhy shows as breaker %v", h, got, err, deferredByWhy)
					}
					got, err = f.store.DeferredByWhy(f.ctx, *deferred, true)
					if err != nil || fmt.Sprint(got) != fmt.Sprint(heldDeferredByWhy) {
						t.Errorf("holds %+v: DeferredByWhy of the held %v (%v), ShownWhy shows held and breaker once lifted %v", h, got, err, heldDeferredByWhy)
					}
				}
			}
		}
		// The cases hold something of each: held, breaker, review, leased and plain jobs.
		if err := f.store.SetHolds(f.ctx, models.Holds{Score: true}, 1); err != nil {
			t.Fatal(err)
		}
		for why, atLeast := range map[models.Why]int{models.WhyHeld: 1, models.WhyBreaker: 1, models.WhyReview: 1, "upstream": 1, "none": 1} {
			rows, err := f.store.ListJobRows(f.ctx, models.JobFilter{Why: why, Deferred: &probe}, models.JobsByID, nil, 1000)
			if err != nil || len(rows) < atLeast {
				t.Errorf("scores held, breaker open: why %s lists %d jobs (%v), want some", why, len(rows), err)
			}
		}
	})
}
