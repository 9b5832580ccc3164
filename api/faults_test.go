package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// A full SQLite database (PRAGMA max_page_count: full at once, deterministically): writes
// answer 507 with Retry-After and write nothing, /readyz answers 503 with the reason, and once
// room is made everything works again without a restart, nothing acknowledged lost.
func TestFullDatabaseAnswers507AndRecovers(t *testing.T) {
	t.Parallel()
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db")
	store := env.App.Store
	_, ann := env.User("ann", models.RoleAuthor)
	ctx := context.Background()
	writer, _, err := store.RawPools()
	if err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := writer.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	// The writer is one connection, and max_page_count is that connection's.
	if _, err := writer.ExecContext(ctx, `PRAGMA max_page_count = `+itoa64(int64(pages+4))); err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("a pitch that takes room ", 150)
	created, full := 0, 0
	for i := 0; i < 200 && full < 3; i++ {
		r := env.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": body + itoa64(int64(i))})
		switch {
		case r.Status == http.StatusCreated:
			created++
		case r.Status == http.StatusInsufficientStorage:
			full++
			if r.ErrorCode() != "insufficient_storage" || r.Header.Get("Retry-After") == "" {
				t.Fatalf("full: %d %s %v", r.Status, r.Body, r.Header)
			}
		default:
			t.Fatalf("write %d: %d %s", i, r.Status, r.Body)
		}
	}
	if full == 0 {
		t.Fatalf("the database never filled (%d writes)", created)
	}
	if n := count(t, store, `SELECT COUNT(*) FROM pitches`); n != created {
		t.Fatalf("%d pitches for %d answers of 201", n, created)
	}
	r := env.Do(http.MethodGet, "/readyz", "", nil)
	if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "insufficient_storage" ||
		!strings.Contains(string(r.Body), "full") {
		t.Fatalf("readyz while full: %d %s", r.Status, r.Body)
	}
	// Reads still answer.
	if r := env.Do(http.MethodGet, "/api/listeners/mine", ann, nil); r.Status != http.StatusOK {
		t.Fatalf("mine while full: %d %s", r.Status, r.Body)
	}

	// Room again: ready at once (its probe writes), and writes succeed, without a restart.
	if _, err := writer.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	if r := env.Do(http.MethodGet, "/readyz", "", nil); r.Status != http.StatusOK {
		t.Fatalf("readyz after room was made: %d %s", r.Status, r.Body)
	}
	if r := env.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": body}); r.Status != http.StatusCreated {
		t.Fatalf("write after room was made: %d %s", r.Status, r.Body)
	}
	if n := count(t, store, `SELECT COUNT(*) FROM pitches`); n != created+1 {
		t.Fatalf("%d pitches, want %d", n, created+1)
	}
	// Every pitch is screened or owes its screen.
	env.Sweep()
	if n := count(t, store, `SELECT COUNT(*) FROM pitches p WHERE NOT EXISTS (SELECT 1 FROM screens v WHERE v.kind = 'pitch' AND v.item_id = p.id)
		AND NOT EXISTS (SELECT 1 FROM content_jobs j WHERE j.kind = 'pitch' AND j.item_id = p.id)`); n != 0 {
		t.Fatalf("%d pitches neither screened nor owed", n)
	}
}

// A write that committed never answers an error: when what runs after the commit fails (here
// the read of the holds, whose table is moved away for the moment), the answer is 201 with the
// screen pending and why, and the item's owed screen runs once the database answers again.
func TestCommittedWriteAnswers201WhenItsScreenCannotBeRead(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		env := owedtest.NewEnv(t, db)
		store := env.App.Store
		_, ann := env.User("ann", models.RoleAuthor)
		ctx := context.Background()
		if _, err := store.RawExec(ctx, `ALTER TABLE holds RENAME TO holds_away`); err != nil {
			t.Fatal(err)
		}
		r := env.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": "after the commit"}, "Idempotency-Key", "p-1")
		if r.Status != http.StatusCreated {
			t.Fatalf("answer: %d %s", r.Status, r.Body)
		}
		var ans struct {
			Pitch  struct{ ID int64 }
			Screen struct {
				State         string
				Why           *string
				NextAttemptAt *string
			}
		}
		r.Decode(t, &ans)
		if ans.Pitch.ID == 0 || ans.Screen.State != "pending" || ans.Screen.Why == nil || *ans.Screen.Why != "unavailable" || ans.Screen.NextAttemptAt == nil {
			t.Fatalf("answer: %s", r.Body)
		}
		// A repeat with the key gets that answer, not a second item.
		again := env.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": "after the commit"}, "Idempotency-Key", "p-1")
		if again.Status != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(r.Body) {
			t.Fatalf("repeat: %d %s", again.Status, again.Body)
		}
		if n := count(t, store, `SELECT COUNT(*) FROM pitches`); n != 1 {
			t.Fatalf("%d pitches", n)
		}
		if n := count(t, store, `SELECT COUNT(*) FROM content_jobs WHERE kind = 'pitch' AND item_id = ?`, ans.Pitch.ID); n != 1 {
			t.Fatalf("the pitch owes %d screens, want 1", n)
		}
		if _, err := store.RawExec(ctx, `ALTER TABLE holds_away RENAME TO holds`); err != nil {
			t.Fatal(err)
		}
		env.Clock.Advance(time.Hour)
		env.Sweep()
		if n := count(t, store, `SELECT COUNT(*) FROM screens WHERE kind = 'pitch' AND item_id = ?`, ans.Pitch.ID); n != 1 {
			t.Fatalf("the pitch was not screened once the database answered (%d verdicts)", n)
		}
	})
}
