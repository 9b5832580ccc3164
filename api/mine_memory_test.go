package api_test

import (
	"context"
	"database/sql"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// TestMine304FromMemoryNeverHidesACommittedChange: a poll whose If-None-Match names the view
// gets its 304 from the version in memory (and one naming none its 200, by the kept answer),
// yet after any change has committed — through the store or, on PostgreSQL, by raw SQL, on
// this replica or another — the next poll gets the new view, never a 304 or an old 200. On PostgreSQL the 304 and the 200 are shown to come from
// memory: they are answered while the kept versions are locked against every read.
func TestMine304FromMemoryNeverHidesACommittedChange(t *testing.T) {
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
		if !pg {
			return
		}
		// From memory: with the kept versions locked, a DB read of the version would wait.
		r := poll("")
		etag := r.Header.Get("ETag")
		if r := poll(etag); r.Status != http.StatusNotModified {
			t.Fatalf("poll: %d", r.Status)
		}
		sqldb, err := sql.Open("pgx", db)
		if err != nil {
			t.Fatal(err)
		}
		defer sqldb.Close()
		tx, err := sqldb.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.Exec(`LOCK TABLE mine_versions IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		done := make(chan int, 1)
		go func() { done <- poll(etag).Status }()
		select {
		case status := <-done:
			if status != http.StatusNotModified {
				t.Fatalf("from memory: %d", status)
			}
		case <-time.After(5 * time.Second):
			tx.Rollback()
			<-done
			t.Fatal("the 304 waited for the kept versions: it was not answered from memory")
		}
		// So is a 200 to a client that names no view: the tag from memory, the answer kept.
		full := make(chan owedtest.Response, 1)
		go func() { full <- poll("") }()
		select {
		case r := <-full:
			if r.Status != http.StatusOK || r.Header.Get("ETag") != etag {
				t.Fatalf("200 from memory: %d, ETag %s, want %s", r.Status, r.Header.Get("ETag"), etag)
			}
		case <-time.After(5 * time.Second):
			tx.Rollback()
			<-full
			t.Fatal("the 200 waited for the kept versions: its tag was not taken from memory")
		}
	})
}

// TestMine304FromMemoryWakesDueJobs: the version in memory keeps when the author's next job
// comes due; a poll answered from memory after that moment still starts the author's sweep,
// as every poll of the view must.
func TestMine304FromMemoryWakesDueJobs(t *testing.T) {
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
