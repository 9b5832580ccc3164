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
	"github.com/owed/owed/notify"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// mineWatcher polls an author's view as a client does, holding the ETag of its last 200. It
// also watches the notifier that wakes long polls and streams, which must hear every change
// the ETag follows (time's own changes, the UTC day, aside: waiters re-read at the day's end).
type mineWatcher struct {
	w     *world
	as    role
	etag  string
	body  map[string]any
	watch *notify.Watch
}

func (w *world) watchMine(as role) *mineWatcher {
	w.t.Helper()
	m := &mineWatcher{w: w, as: as, watch: w.env.App.Notify.Watch(w.uid[as])}
	w.t.Cleanup(func() { m.watch.Close() })
	r := w.do(http.MethodGet, "/api/listeners/mine", as, nil)
	if r.Status != http.StatusOK || r.Header.Get("ETag") == "" {
		w.t.Fatalf("mine: %d %s, ETag %q", r.Status, r.Body, r.Header.Get("ETag"))
	}
	m.etag, m.body = r.Header.Get("ETag"), r.JSON()
	return m
}

// changed checks that the view answers 200 with a new ETag to the ETag held: the same answer,
// body and ETag, as a poll without one; and 304 to the new ETag.
func (m *mineWatcher) changed(what string) {
	m.w.t.Helper()
	r := m.w.do(http.MethodGet, "/api/listeners/mine", m.as, nil, "If-None-Match", m.etag)
	etag := r.Header.Get("ETag")
	if r.Status != http.StatusOK || etag == "" || etag == m.etag {
		m.w.t.Fatalf("after %s: %d, ETag %q (was %q); want 200 and a new ETag", what, r.Status, etag, m.etag)
	}
	fresh := m.w.do(http.MethodGet, "/api/listeners/mine", m.as, nil)
	if fresh.Header.Get("ETag") != etag || string(fresh.Body) != string(r.Body) {
		m.w.t.Errorf("after %s: a poll without If-None-Match answers ETag %q %s, want %q %s", what, fresh.Header.Get("ETag"), fresh.Body, etag, r.Body)
	}
	if again := m.w.do(http.MethodGet, "/api/listeners/mine", m.as, nil, "If-None-Match", etag); again.Status != http.StatusNotModified {
		m.w.t.Errorf("after %s: the new ETag answers %d, want 304", what, again.Status)
	}
	m.etag, m.body = etag, r.JSON()
	if !strings.Contains(what, "UTC day") {
		m.woken(what)
	}
	m.watch = m.watch.Renew()
}

// woken checks that the notifier woke the author's waiters: at once on SQLite (the store tells
// it before the write returns), through LISTEN on PostgreSQL (a trigger's NOTIFY, at commit).
func (m *mineWatcher) woken(what string) {
	m.w.t.Helper()
	if m.w.env.App.Notify.Listens() {
		select {
		case <-m.watch.C():
		case <-time.After(10 * time.Second):
			m.w.t.Fatalf("after %s: the notifier did not wake the author's waiters", what)
		}
		return
	}
	select {
	case <-m.watch.C():
	default:
		m.w.t.Fatalf("after %s: the notifier did not wake the author's waiters", what)
	}
}

// same checks that the view answers 304, with the ETag held, to the ETag held.
func (m *mineWatcher) same(what string) {
	m.w.t.Helper()
	r := m.w.do(http.MethodGet, "/api/listeners/mine", m.as, nil, "If-None-Match", m.etag)
	if r.Status != http.StatusNotModified || len(r.Body) != 0 || r.Header.Get("ETag") != m.etag {
		m.w.t.Fatalf("after %s: %d %s, ETag %q; want 304, no body, ETag %q", what, r.Status, r.Body, r.Header.Get("ETag"), m.etag)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "private, no-cache" {
		m.w.t.Errorf("after %s: Cache-Control %q on the 304", what, cc)
	}
	if !m.w.env.App.Notify.Listens() {
		// In-process the notifier is told synchronously, so a wake would show by now. (Over
		// LISTEN a stray wake costs one read of the version, which then finds it the same.)
		select {
		case <-m.watch.C():
			m.w.t.Errorf("after %s: the notifier woke the author's waiters, though their view did not change", what)
			m.watch = m.watch.Renew()
		default:
		}
	}
}

func (m *mineWatcher) items() int { return len(list(m.body["items"])) }

func (m *mineWatcher) budget() map[string]any { return obj(m.body["budget"]) }

// TestMineETagFollowsEveryChange: the author's view has a new ETag after every change to what it
// shows (an item of each kind written or deleted, a verdict, a score, a job rescheduled or
// retried, a charge, the admin's limit, the UTC day), and keeps its ETag (304) through what it
// does not show: another author's changes, a claim's lease, time passing within the day.
func TestMineETagFollowsEveryChange(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet() // writes answer pending; nothing changes unless the test does it
		ctx := context.Background()
		st := w.store()
		ann, ben := w.uid[asAuthor], w.uid[asOther]
		m := w.watchMine(asAuthor)
		if m.items() != 0 {
			t.Fatalf("a new author's view: %v", m.body)
		}
		m.same("nothing")
		for _, inm := range []string{"*", `W/` + m.etag, `"x", ` + m.etag + `, "y"`} {
			if r := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil, "If-None-Match", inm); r.Status != http.StatusNotModified {
				t.Errorf("If-None-Match %s: %d, want 304", inm, r.Status)
			}
		}
		if r := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil, "If-None-Match", `W/"x", "y"`); r.Status != http.StatusOK {
			t.Errorf("If-None-Match of other ETags: %d, want 200", r.Status)
		}

		// New items of each kind.
		created := w.created("/api/listeners/songs", asAuthor, map[string]string{"title": "Tide", "code": "s()"})
		song, rev1 := num(obj(created["song"])["id"]), num(obj(created["revision"])["id"])
		m.changed("a new song (its first revision)")
		rev2 := num(obj(w.created(fmt.Sprintf("/api/listeners/songs/%d/revisions", song), asAuthor, map[string]string{"code": "s(2)"})["revision"])["id"])
		m.changed("a new revision")
		w.screen(models.KindRevision, rev1, asAuthor, models.VerdictAllow) // the song is public now, and rev1 owes its score
		m.changed("a revision's verdict")
		comment := num(obj(w.created(fmt.Sprintf("/api/listeners/songs/%d/comments", song), asAuthor, map[string]string{"body": "mine"})["comment"])["id"])
		m.changed("a new comment")
		pitch := num(obj(w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "pitch"})["pitch"])["id"])
		m.changed("a new pitch")
		if m.items() != 4 {
			t.Fatalf("view after four items: %v", m.body)
		}

		// Another author's changes are not in this view.
		benSong := num(obj(w.created("/api/listeners/songs", asOther, map[string]string{"title": "Ben", "code": "b()"})["song"])["id"])
		m.same("another author's song")
		w.created(fmt.Sprintf("/api/listeners/songs/%d/comments", song), asOther, map[string]string{"body": "on ann's song"})
		m.same("another author's comment on this author's song")
		benPitch := num(obj(w.created("/api/listeners/pitches", asOther, map[string]string{"body": "ben's"})["pitch"])["id"])
		m.same("another author's pitch")
		w.screen(models.KindPitch, benPitch, asOther, models.VerdictAllow)
		m.same("another author's verdict")
		if _, ok, err := st.Charge(ctx, ben, 1, w.env.Clock.Now()); err != nil || !ok {
			t.Fatalf("charge ben: %v %v", ok, err)
		}
		m.same("another author's charge")
		if r := w.do(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/budget", ben), asAdmin, map[string]any{"dailyLimit": 3}); r.Status != http.StatusOK {
			t.Fatalf("ben's limit: %d %s", r.Status, r.Body)
		}
		m.same("another author's limit")
		if _, err := st.RetryJobs(ctx, models.JobFilter{UserID: ben}); err != nil {
			t.Fatal(err)
		}
		m.same("another author's jobs retried")
		if r := w.do(http.MethodDelete, fmt.Sprintf("/api/listeners/songs/%d", benSong), asOther, nil); r.Status != http.StatusNoContent {
			t.Fatalf("delete ben's song: %d", r.Status)
		}
		m.same("another author's deletion")

		// A claim alone: the lease is not in the view.
		lease := w.env.App.Config.Lease
		job, ok, err := st.ClaimItem(ctx, models.TaskScreen, models.KindPitch, pitch, lease, "test-owner")
		if err != nil || !ok {
			t.Fatalf("claim the pitch's screen: %v %v", ok, err)
		}
		m.same("a claim")
		// Its reschedule: why, attempts and the next attempt change.
		status, why := 503, models.WhyUpstream
		at := w.env.Clock.Now().Add(time.Hour)
		if ok, err := st.Reschedule(ctx, job, at, models.WhyUpstream, &status, models.Event{Event: models.TaskScreen,
			Kind: models.KindPitch, ItemID: pitch, UserID: ann, Outcome: "pending", Why: &why, Status: &status}); err != nil || !ok {
			t.Fatalf("reschedule: %v %v", ok, err)
		}
		m.changed("a reschedule")
		// The admin's retry makes it due now.
		if r := w.do(http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/retry", job.ID), asAdmin, nil); r.Status != http.StatusOK {
			t.Fatalf("retry: %d %s", r.Status, r.Body)
		}
		m.changed("an admin's retry")
		// A reschedule that changes the attempts alone: the same why, status and due time.
		again, ok, err := st.ClaimItem(ctx, models.TaskScreen, models.KindPitch, pitch, lease, "test-owner")
		if err != nil || !ok {
			t.Fatalf("claim the retried job: %v %v", ok, err)
		}
		m.same("a second claim")
		if ok, err := st.Reschedule(ctx, again, again.DueAt, why, &status, models.Event{Event: models.TaskScreen,
			Kind: models.KindPitch, ItemID: pitch, UserID: ann, Outcome: "pending", Why: &why, Status: &status}); err != nil || !ok {
			t.Fatalf("reschedule: %v %v", ok, err)
		}
		m.changed("a reschedule of the attempts alone")
		// Time passing within the day changes nothing shown, due jobs or not.
		w.env.Clock.Advance(time.Hour)
		m.same("an hour passing")

		// A verdict and a score.
		w.screen(models.KindComment, comment, asAuthor, models.VerdictBlock)
		m.changed("a comment's verdict")
		if ok, err := st.RecordScore(ctx, models.Score{RevisionID: rev1, Art: 0.7, ArtRuns: []float64{0.6, 0.7, 0.8},
			Criteria: map[string]float64{"groove": 0.7}, Model: "critic", Rubric: "art-v1"},
			models.Event{Event: models.TaskScore, Kind: models.KindRevision, ItemID: rev1, UserID: ann, Outcome: "scored"}); err != nil || !ok {
			t.Fatalf("record score: %v %v", ok, err)
		}
		m.changed("a score")

		// The budget: a charge, the admin's limit and back to the default.
		if _, ok, err := st.Charge(ctx, ann, 1, w.env.Clock.Now()); err != nil || !ok {
			t.Fatalf("charge: %v %v", ok, err)
		}
		m.changed("a charge")
		if num(m.budget()["spent"]) != 1 {
			t.Errorf("budget after a charge: %v", m.budget())
		}
		if r := w.do(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/budget", ann), asAdmin, map[string]any{"dailyLimit": 7}); r.Status != http.StatusOK {
			t.Fatalf("limit: %d %s", r.Status, r.Body)
		}
		m.changed("the admin's limit")
		if num(m.budget()["limit"]) != 7 {
			t.Errorf("budget after the limit: %v", m.budget())
		}
		if r := w.do(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/budget", ann), asAdmin, map[string]any{"dailyLimit": nil}); r.Status != http.StatusOK {
			t.Fatalf("limit: %d %s", r.Status, r.Body)
		}
		m.changed("the limit back to the default")

		// Deletions.
		for _, del := range []struct{ what, path string }{
			{"a deleted pitch", fmt.Sprintf("/api/listeners/pitches/%d", pitch)},
			{"a deleted comment", fmt.Sprintf("/api/listeners/comments/%d", comment)},
			{"a deleted revision", fmt.Sprintf("/api/listeners/revisions/%d", rev2)},
		} {
			if r := w.do(http.MethodDelete, del.path, asAuthor, nil); r.Status != http.StatusNoContent {
				t.Fatalf("%s: %d %s", del.what, r.Status, r.Body)
			}
			m.changed(del.what)
		}
		if m.items() != 1 {
			t.Errorf("view after the deletions: %v", m.body)
		}
		// One screened pitch replaced by another between two polls: as many items, no job
		// either side; only the ids differ.
		old := num(obj(w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "old"})["pitch"])["id"])
		w.screen(models.KindPitch, old, asAuthor, models.VerdictAllow)
		m.changed("a screened pitch")
		replacement := num(obj(w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "new"})["pitch"])["id"])
		w.screen(models.KindPitch, replacement, asAuthor, models.VerdictAllow)
		if r := w.do(http.MethodDelete, fmt.Sprintf("/api/listeners/pitches/%d", old), asAuthor, nil); r.Status != http.StatusNoContent {
			t.Fatalf("delete the old pitch: %d", r.Status)
		}
		m.changed("a screened pitch replaced by another")

		// The UTC day rolling over: a new budget day, nothing else.
		now := w.env.Clock.Now()
		w.env.Clock.Advance(models.BudgetReset(now).Sub(now) - time.Second)
		m.same("the day's last second")
		w.env.Clock.Advance(time.Second)
		m.changed("a new UTC day")
		if b := m.budget(); num(b["spent"]) != 0 || b["resetsAt"] != models.BudgetReset(w.env.Clock.Now()).Format("2006-01-02T15:04:05.000Z07:00") {
			t.Errorf("budget on the new day: %v", b)
		}
		m.same("nothing since")
		w.env.Clock.Advance(24 * time.Hour)
		m.changed("another new UTC day, nothing spent on either")
	})
}

// TestMineRunsDueJobs: once an author's job put off is due, the author's view runs it (it wakes
// the runner for the author), with nobody else sweeping.
func TestMineRunsDueJobs(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		model := w.env.Model
		ctx := context.Background()
		st := w.store()
		ann := w.uid[asAuthor]
		model.Fail(http.StatusServiceUnavailable, nil)
		pitch := num(obj(w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "pitch"})["pitch"])["id"])
		model.Reset()
		job := w.job(models.TaskScreen, models.KindPitch, pitch)
		if job.Why == nil || job.DueAt.UnixMilli() <= w.env.Clock.Now().UnixMilli() || job.LeaseUntil != nil {
			t.Fatalf("the pitch's job should wait, unleased: %+v", job)
		}
		calls := model.Calls()
		if r := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil); r.Status != http.StatusOK {
			t.Fatalf("mine with nothing due: %d %s", r.Status, r.Body)
		}
		if _, err := st.RetryJobs(ctx, models.JobFilter{UserID: ann}); err != nil {
			t.Fatal(err)
		}
		// Now the job is due: the view wakes the runner, which settles it.
		if r := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil); r.Status != http.StatusOK {
			t.Fatalf("mine with a due job: %d %s", r.Status, r.Body)
		}
		wait.Until(t, "the due pitch screened by the author's sweep", func() bool {
			jobs, err := owedtest.ListJobs(ctx, st, models.JobFilter{Kind: models.KindPitch, ItemID: pitch}, 0, 10)
			return err == nil && len(jobs) == 0 && model.Calls() > calls
		})
	})
}

// TestMine304NeverHidesACommittedChange: a poll whose If-None-Match names the view gets its 304
// (and one naming none its 200, by the kept answer), yet after any change has committed —
// through the store or, on PostgreSQL, by raw SQL, on this replica or another — the next poll
// gets the new view, never a 304 or an old 200.
func TestMine304NeverHidesACommittedChange(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		ctx := context.Background()
		a := owedtest.NewEnv(t, db)
		b := a // the replica that answers the polls
		pg := strings.HasPrefix(db, "postgres")
		if pg {
			b = owedtest.NewEnv(t, db)
		}
		ann, tok := a.User("ann", models.RoleAuthor)
		// Nothing runs by itself: held work is never swept, so only the test changes the view.
		if err := a.App.Store.SetHolds(ctx, models.Holds{Screen: true, Score: true}, ann); err != nil {
			t.Fatal(err)
		}
		poll := func(etag string) owedtest.Response {
			t.Helper()
			if etag == "" {
				return b.Do(http.MethodGet, "/api/listeners/mine", tok, nil)
			}
			return b.Do(http.MethodGet, "/api/listeners/mine", tok, nil, "If-None-Match", etag)
		}
		store := a.App.Store
		var pitch int64
		changes := []struct {
			name string
			do   func() error
			raw  bool
		}{
			{"a pitch", func() error { p, err := store.CreatePitch(ctx, ann, "p"); pitch = p.ID; return err }, false},
			{"a charge", func() error { _, _, err := store.Charge(ctx, ann, 1, a.Clock.Now()); return err }, false},
			{"a verdict", func() error {
				_, err := store.RecordScreen(ctx, models.KindPitch, pitch, models.VerdictAllow, 0.9, models.Event{Event: "screen", Outcome: "allow", UserID: ann, Kind: models.KindPitch, ItemID: pitch})
				return err
			}, false},
			{"an overturn", func() error {
				_, _, err := store.OverturnScreen(ctx, models.KindPitch, pitch, models.VerdictBlock, models.Event{Event: "screen", Outcome: "block", UserID: ann, Kind: models.KindPitch, ItemID: pitch})
				return err
			}, false},
			{"a deletion", func() error { return store.DeleteItem(ctx, ann, models.KindPitch, pitch) }, false},
			{"a raw pitch", func() error {
				_, err := store.RawExec(ctx, `INSERT INTO pitches (user_id, body, created_at) VALUES (?, 'raw', ?)`, ann, a.Clock.Now().UnixMilli())
				return err
			}, true},
			{"a raw reschedule", func() error {
				_, err := store.RawExec(ctx, `UPDATE content_jobs SET due_at = due_at + 1000 WHERE user_id = ?`, ann)
				return err
			}, true},
			{"a raw charge", func() error {
				_, err := store.RawExec(ctx, `UPDATE budgets SET spent = spent + 1 WHERE user_id = ?`, ann)
				return err
			}, true},
			{"a raw edit", func() error {
				_, err := store.RawExec(ctx, `UPDATE pitches SET body = body || '!' WHERE user_id = ?`, ann)
				return err
			}, true},
			{"a raw deletion of today's spend", func() error {
				_, err := store.RawExec(ctx, `DELETE FROM budgets WHERE user_id = ?`, ann)
				return err
			}, true},
		}
		for round := range 5 {
			for _, c := range changes {
				if c.raw && !pg {
					continue // on SQLite the notifier hears the store (one process holds every writer)
				}
				r := poll("")
				etag := r.Header.Get("ETag")
				if r.Status != http.StatusOK || etag == "" {
					t.Fatalf("first poll: %d %q", r.Status, etag)
				}
				for range 3 {
					if r := poll(etag); r.Status != http.StatusNotModified {
						t.Fatalf("round %d, before %s: unchanged view answered %d", round, c.name, r.Status)
					}
				}
				if err := c.do(); err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				// Committed: the very next poll sees it, on whichever replica, whether it names
				// the old view (odd rounds) or names none (even rounds: a 200 whose tag, had it
				// come from a stale memory, would be the old one).
				ask := etag
				if round%2 == 0 {
					ask = ""
				}
				if r := poll(ask); r.Status != http.StatusOK || r.Header.Get("ETag") == etag {
					t.Fatalf("round %d: after %s committed, the poll (If-None-Match %q) answered %d (ETag %s, was %s)", round, c.name, ask, r.Status, r.Header.Get("ETag"), etag)
				}
			}
		}
	})
}

// TestMine304WakesDueJobs: a poll answered 304 after the author's next job comes due still
// starts the author's sweep, as every poll of the view must.
func TestMine304WakesDueJobs(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		ctx := context.Background()
		env := owedtest.NewEnv(t, db)
		ann, tok := env.User("ann", models.RoleAuthor)
		store := env.App.Store
		if err := store.SetHolds(ctx, models.Holds{Screen: true}, ann); err != nil {
			t.Fatal(err)
		}
		p, err := store.CreatePitch(ctx, ann, "later")
		if err != nil {
			t.Fatal(err)
		}
		// Put off by an hour, then the hold lifted: nothing due until then.
		if _, err := store.RawExec(ctx, `UPDATE content_jobs SET due_at = ? WHERE item_id = ? AND kind = 'pitch'`,
			env.Clock.Now().Add(time.Hour).UnixMilli(), p.ID); err != nil {
			t.Fatal(err)
		}
		if err := store.SetHolds(ctx, models.Holds{}, ann); err != nil {
			t.Fatal(err)
		}
		r := env.Do(http.MethodGet, "/api/listeners/mine", tok, nil)
		etag := r.Header.Get("ETag")
		if r := env.Do(http.MethodGet, "/api/listeners/mine", tok, nil, "If-None-Match", etag); r.Status != http.StatusNotModified {
			t.Fatalf("poll: %d", r.Status)
		}
		env.Clock.Advance(time.Hour)
		if r := env.Do(http.MethodGet, "/api/listeners/mine", tok, nil, "If-None-Match", etag); r.Status != http.StatusNotModified {
			t.Fatalf("poll at the due time: %d", r.Status)
		}
		// That poll started the sweep: the pitch is screened without anyone else running it.
		wait.Until(t, "the due job run by the poll's sweep", func() bool {
			r := env.Do(http.MethodGet, "/api/listeners/mine", tok, nil, "If-None-Match", etag)
			return r.Status == http.StatusOK && strings.Contains(string(r.Body), `"state":"public"`)
		})
	})
}

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
