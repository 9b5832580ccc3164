package models_test

import (
	"errors"
	"strings"
	"sync"
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
		if known, err := f.store.TokenKnown(f.ctx, token); err != nil || !known {
			t.Errorf("token known = %v, %v; want true", known, err)
		}
		if known, err := f.store.TokenKnown(f.ctx, token+"x"); err != nil || known {
			t.Errorf("wrong token known = %v, %v; want false", known, err)
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
		// An admin beside the author: a count by role counts only that role, an empty role all.
		if _, _, err := f.store.CreateUser(f.ctx, "root", models.RoleAdmin); err != nil {
			t.Fatal(err)
		}
		if n, _ := f.store.CountUsers(f.ctx, models.RoleAuthor); n != 1 {
			t.Errorf("authors = %d, want 1", n)
		}
		if n, _ := f.store.CountUsers(f.ctx, ""); n != 2 {
			t.Errorf("users = %d, want 2", n)
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

// TestSessionsAreCappedOldestFirst: signing in once more than MaxSessionsPerUser ends the
// oldest session and only it.
func TestSessionsAreCappedOldestFirst(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		var sids []string
		for range models.MaxSessionsPerUser + 1 {
			sid, err := f.store.CreateSession(f.ctx, ann, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			sids = append(sids, sid)
			f.clk.Advance(time.Second)
		}
		if n, _ := f.store.CountSessions(f.ctx, ann); n != models.MaxSessionsPerUser {
			t.Errorf("%d sessions, want the cap %d", n, models.MaxSessionsPerUser)
		}
		if _, err := f.store.UserBySession(f.ctx, sids[0]); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("the oldest session: %v, want it ended", err)
		}
		if u, err := f.store.UserBySession(f.ctx, sids[1]); err != nil || u.ID != ann {
			t.Errorf("the second oldest: %+v, %v; want it kept", u, err)
		}
	})
}

// TestRotateTokenAndDisable: a rotated token replaces the old one at once and ends every
// session but the one kept; disabling ends sessions and the token, never the last enabled
// admin; expired sessions are pruned at their own millisecond.
func TestRotateTokenAndDisable(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann, annToken, err := f.store.CreateUser(f.ctx, "ann", models.RoleAuthor)
		if err != nil {
			t.Fatal(err)
		}
		root, _, err := f.store.CreateUser(f.ctx, "root", models.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		keep, _ := f.store.CreateSession(f.ctx, ann.ID, time.Hour)
		drop, _ := f.store.CreateSession(f.ctx, ann.ID, 2*time.Hour)
		rootSession, _ := f.store.CreateSession(f.ctx, root.ID, 2*time.Hour)
		if n, _ := f.store.CountSessions(f.ctx, 0); n != 3 {
			t.Errorf("everyone's sessions = %d, want 3", n)
		}

		u, token, err := f.store.RotateToken(f.ctx, ann.ID, models.HashToken(keep))
		if err != nil || u.ID != ann.ID || token == annToken {
			t.Fatalf("rotate = %+v, %q, %v", u, token, err)
		}
		if _, err := f.store.UserByToken(f.ctx, annToken); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("the old token after a rotation: %v, want not found", err)
		}
		if got, err := f.store.UserByToken(f.ctx, token); err != nil || got.ID != ann.ID {
			t.Errorf("the new token: %+v, %v", got, err)
		}
		if _, err := f.store.UserBySession(f.ctx, drop); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("a session the rotation did not keep: %v, want ended", err)
		}
		if _, err := f.store.UserBySession(f.ctx, keep); err != nil {
			t.Errorf("the kept session: %v", err)
		}
		if _, err := f.store.UserBySession(f.ctx, rootSession); err != nil {
			t.Errorf("another user's session: %v", err)
		}
		if _, _, err := f.store.RotateToken(f.ctx, 9999, ""); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("rotate a missing user: %v", err)
		}

		// Expired at exactly now: pruned; the root's session, an hour from its end, is not.
		f.clk.Advance(time.Hour)
		if n, err := f.store.PruneSessions(f.ctx, f.clk.Now()); err != nil || n != 1 {
			t.Errorf("pruned %d, %v; want the one session expiring now", n, err)
		}
		if n, _ := f.store.CountSessions(f.ctx, ann.ID); n != 0 {
			t.Errorf("ann's sessions after the prune = %d", n)
		}

		if _, err := f.store.SetDisabled(f.ctx, root.ID, true); !errors.Is(err, models.ErrConflict) {
			t.Errorf("disable the last admin: %v, want a conflict", err)
		}
		if _, err := f.store.SetDisabled(f.ctx, 9999, true); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("disable a missing user: %v", err)
		}
		d, err := f.store.SetDisabled(f.ctx, ann.ID, true)
		if err != nil || !d.Disabled {
			t.Fatalf("disable an author = %+v, %v", d, err)
		}
		if _, err := f.store.UserByToken(f.ctx, token); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("a disabled user's token: %v, want not found", err)
		}
		annSession, _ := f.store.CreateSession(f.ctx, ann.ID, time.Hour)
		if _, err := f.store.UserBySession(f.ctx, annSession); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("a disabled user's session: %v, want not found", err)
		}
		if e, err := f.store.SetDisabled(f.ctx, ann.ID, false); err != nil || e.Disabled {
			t.Fatalf("enable = %+v, %v", e, err)
		}
		if got, err := f.store.UserByToken(f.ctx, token); err != nil || got.ID != ann.ID {
			t.Errorf("the token after enabling: %+v, %v", got, err)
		}

		// With a second admin either may be disabled, and the disabled one's sessions end.
		other, _, _ := f.store.CreateUser(f.ctx, "root2", models.RoleAdmin)
		if d, err := f.store.SetDisabled(f.ctx, root.ID, true); err != nil || !d.Disabled {
			t.Fatalf("disable one of two admins = %+v, %v", d, err)
		}
		if n, _ := f.store.CountSessions(f.ctx, root.ID); n != 0 {
			t.Errorf("a disabled admin's sessions = %d, want none", n)
		}
		if _, err := f.store.SetDisabled(f.ctx, other.ID, true); !errors.Is(err, models.ErrConflict) {
			t.Errorf("disable the admin left: %v, want a conflict", err)
		}
		// Disabling an admin who is already disabled is no loss of an admin.
		if d, err := f.store.SetDisabled(f.ctx, root.ID, true); err != nil || !d.Disabled {
			t.Errorf("disable a disabled admin again = %+v, %v", d, err)
		}
		us, err := f.store.ListUsers(f.ctx, ann.ID, 10)
		if err != nil || len(us) != 2 || us[0].ID != root.ID || us[1].ID != other.ID {
			t.Errorf("users after ann = %+v, %v", us, err)
		}
	})
}

// TestTwoAdminsDisablingEachOtherAtOnce: of two admins who disable each other at the same
// moment, one stays enabled, round after round (the admins' rows are locked for the check).
func TestTwoAdminsDisablingEachOtherAtOnce(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		a, _, _ := f.store.CreateUser(f.ctx, "a", models.RoleAdmin)
		b, _, _ := f.store.CreateUser(f.ctx, "b", models.RoleAdmin)
		for round := range 40 {
			start := make(chan struct{})
			var wg sync.WaitGroup
			for _, id := range []int64{a.ID, b.ID} {
				wg.Go(func() {
					<-start
					f.store.SetDisabled(f.ctx, id, true) // one of the two is refused: ErrConflict
				})
			}
			close(start)
			wg.Wait()
			if n, _ := f.store.CountUsers(f.ctx, models.RoleAdmin); n != 2 {
				t.Fatalf("admins = %d", n)
			}
			var enabled int64
			f.store.RawScan(f.ctx, &enabled, `SELECT COUNT(*) FROM users WHERE role = 'admin' AND disabled = 0`)
			if enabled != 1 {
				t.Fatalf("round %d: %d admins enabled, want exactly 1", round, enabled)
			}
			for _, id := range []int64{a.ID, b.ID} {
				if _, err := f.store.SetDisabled(f.ctx, id, false); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
