package models_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// Tokens are kept hashed and find their user; sessions last their time on the store's clock.
func TestUsersAndSessions(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		u, token, err := f.store.CreateUser(f.ctx, "ann", models.RoleAuthor)
		if err != nil || !strings.HasPrefix(token, "owed_") {
			t.Fatalf("create = %+v, %q, %v", u, token, err)
		}
		var stored string
		f.store.RawScan(f.ctx, &stored, `SELECT token_hash FROM users WHERE id = ?`, u.ID)
		if stored == token || stored != models.HashToken(token) {
			t.Errorf("stored %q: want the token's hash, never the token", stored)
		}
		if got, err := f.store.UserByToken(f.ctx, token); err != nil || got.ID != u.ID || got.Role != models.RoleAuthor {
			t.Errorf("by token = %+v, %v", got, err)
		}
		if _, err := f.store.UserByToken(f.ctx, token+"x"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("wrong token: %v", err)
		}

		sid, err := f.store.CreateSession(f.ctx, u.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := f.store.UserBySession(f.ctx, sid); err != nil || got.ID != u.ID {
			t.Errorf("by session = %+v, %v", got, err)
		}
		f.clk.Advance(time.Hour)
		if _, err := f.store.UserBySession(f.ctx, sid); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("expired session: %v, want not found", err)
		}
		sid2, _ := f.store.CreateSession(f.ctx, u.ID, time.Hour)
		if err := f.store.DeleteSession(f.ctx, sid2); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.UserBySession(f.ctx, sid2); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("signed-out session: %v", err)
		}
		var left int64
		f.store.RawScan(f.ctx, &left, `SELECT COUNT(*) FROM sessions`)
		if left != 0 {
			t.Errorf("%d sessions left, want the expired one swept too", left)
		}

		if _, err := f.store.SetDailyLimit(f.ctx, 9999, ptr(int64(1))); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("limit of a missing user: %v", err)
		}
		if n, _ := f.store.CountUsers(f.ctx, models.RoleAuthor); n != 1 {
			t.Errorf("authors = %d", n)
		}

		// Deleting a user takes their items and so their owed work.
		f.store.CreatePitch(f.ctx, u.ID, "p")
		f.store.CreateSong(f.ctx, u.ID, "S", "c")
		f.Exec(`DELETE FROM users WHERE id = ?`, u.ID)
		if n := f.CountJobs(); n != 0 {
			t.Errorf("jobs after the user's delete = %d", n)
		}
	})
}
