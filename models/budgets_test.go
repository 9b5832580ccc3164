package models_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// A charge the rest of the day cannot cover is refused whole; what is charged is what is spent.
func TestChargeRefusedWhole(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		now := f.clk.Now()
		for i := range 33 {
			spent, ok, err := f.store.Charge(f.ctx, ann, 3, now)
			if err != nil || !ok || spent != int64(3*(i+1)) {
				t.Fatalf("charge %d = %d, %v, %v", i, spent, ok, err)
			}
		}
		// 99 spent: 3 more would be 102, so nothing is taken; 1 more fits exactly.
		if spent, ok, err := f.store.Charge(f.ctx, ann, 3, now); ok || err != nil || spent != 0 {
			t.Fatalf("charge over the limit = %d, %v, %v; want refused", spent, ok, err)
		}
		if got, _ := f.store.Spent(f.ctx, ann, now); got != 99 {
			t.Fatalf("spent after a refusal = %d, want 99 (refused whole)", got)
		}
		if spent, ok, _ := f.store.Charge(f.ctx, ann, 1, now); !ok || spent != 100 {
			t.Fatalf("charge to the limit = %d, %v; want 100, ok", spent, ok)
		}
		if _, ok, _ := f.store.Charge(f.ctx, ann, 1, now); ok {
			t.Fatal("charged past the limit")
		}
		// A first charge larger than the whole budget is refused too.
		bob := f.User("bob")
		if _, err := f.store.SetDailyLimit(f.ctx, bob, ptr(int64(2))); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := f.store.Charge(f.ctx, bob, 3, now); ok {
			t.Fatal("a charge above the whole limit was accepted")
		}
		if got, _ := f.store.Spent(f.ctx, bob, now); got != 0 {
			t.Fatalf("bob spent %d, want 0", got)
		}
	})
}

// Concurrent charges never take the spend past the limit, and every accepted charge is counted.
func TestChargeConcurrentNeverAboveLimit(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const charges, n, limit = 50, 3, 100
		f := newFixture(t, db, owedtest.DailyLimit(limit))
		ann := f.User("ann")
		now := f.clk.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		accepted := 0
		var maxSeen int64
		for range charges {
			wg.Go(func() {
				spent, ok, err := f.store.Charge(f.ctx, ann, n, now)
				if err != nil {
					t.Errorf("charge: %v", err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if ok {
					accepted++
					maxSeen = max(maxSeen, spent)
				}
			})
		}
		wg.Wait()
		spent, err := f.store.Spent(f.ctx, ann, now)
		if err != nil {
			t.Fatal(err)
		}
		if spent > limit {
			t.Fatalf("spent %d, above the limit %d", spent, limit)
		}
		if spent != int64(accepted*n) {
			t.Fatalf("spent %d, but %d charges of %d were accepted", spent, accepted, n)
		}
		if accepted != limit/n || maxSeen != spent {
			t.Errorf("accepted %d charges (max spend seen %d), want %d: the budget is used up to what fits", accepted, maxSeen, limit/n)
		}
	})
}

// A user's own daily limit overrides the default, both ways.
func TestChargeUserLimitOverridesDefault(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann, bob := f.User("ann"), f.User("bob")
		now := f.clk.Now()
		if _, err := f.store.SetDailyLimit(f.ctx, ann, ptr(int64(5))); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.SetDailyLimit(f.ctx, bob, ptr(int64(500))); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := f.store.Charge(f.ctx, ann, 3, now); !ok {
			t.Fatal("ann's first charge refused")
		}
		if _, ok, _ := f.store.Charge(f.ctx, ann, 3, now); ok {
			t.Fatal("ann charged 6 against her own limit of 5")
		}
		if _, ok, _ := f.store.Charge(f.ctx, bob, 200, now); !ok {
			t.Fatal("bob's charge of 200 refused though his own limit is 500")
		}
		// Back to the default.
		if _, err := f.store.SetDailyLimit(f.ctx, ann, nil); err != nil {
			t.Fatal(err)
		}
		if spent, ok, _ := f.store.Charge(f.ctx, ann, 3, now); !ok || spent != 6 {
			t.Fatalf("ann on the default = %d, %v; want 6, ok", spent, ok)
		}
	})
}

// The budget is per UTC day: at 00:00 UTC the spend starts again from zero.
func TestChargeResetsAtMidnightUTC(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db, owedtest.DailyLimit(10))
		ann := f.User("ann")
		if _, ok, _ := f.store.Charge(f.ctx, ann, 10, f.clk.Now()); !ok {
			t.Fatal("charge refused")
		}
		reset := models.BudgetReset(f.clk.Now())
		if want := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC); !reset.Equal(want) {
			t.Fatalf("reset = %v, want %v", reset, want)
		}
		f.clk.Set(reset.Add(-time.Millisecond))
		if _, ok, _ := f.store.Charge(f.ctx, ann, 1, f.clk.Now()); ok {
			t.Fatal("charged at 23:59:59.999 of a spent day")
		}
		f.clk.Set(reset)
		if got, _ := f.store.Spent(f.ctx, ann, f.clk.Now()); got != 0 {
			t.Fatalf("spent at midnight = %d, want 0", got)
		}
		if spent, ok, _ := f.store.Charge(f.ctx, ann, 10, f.clk.Now()); !ok || spent != 10 {
			t.Fatalf("charge after the reset = %d, %v", spent, ok)
		}
		// A time zone other than UTC does not move the day.
		east := time.FixedZone("UTC+14", 14*3600)
		if got := models.BudgetReset(time.Date(2026, 12, 1, 9, 0, 0, 0, east)); !got.Equal(reset) {
			t.Errorf("reset of a UTC+14 morning = %v, want %v", got, reset)
		}
		if n, err := f.store.PruneBudgets(f.ctx, f.clk.Now()); err != nil || n != 1 {
			t.Errorf("pruned %d, %v; want yesterday's row", n, err)
		}
		if got, _ := f.store.Spent(f.ctx, ann, f.clk.Now()); got != 10 {
			t.Errorf("today's spend after pruning = %d, want 10", got)
		}
	})
}

// The default daily limit is the store's (Options.DailyLimit): a charge is judged against it,
// and users and budget rows come back with it as their effective limit, so what an author is
// shown is what they are charged against. Changing it (a restart with another
// OWED_DAILY_BUDGET) changes every author without a limit of their own, and no one else.
func TestDefaultDailyLimitIsTheStores(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db, owedtest.DailyLimit(5))
		ann, bob := f.User("ann"), f.User("bob")
		if _, err := f.store.SetDailyLimit(f.ctx, bob, ptr(int64(50))); err != nil {
			t.Fatal(err)
		}
		now := f.clk.Now()
		limits := func(s *models.Store, wantAnn, wantBob int64) {
			t.Helper()
			for id, want := range map[int64]int64{ann: wantAnn, bob: wantBob} {
				u, err := s.UserByID(f.ctx, id)
				if err != nil || u.DailyLimit != want {
					t.Errorf("user %d: limit %d (%v), want %d", id, u.DailyLimit, err, want)
				}
			}
			rows, err := s.Budgets(f.ctx, now, 0, 2) // ann's and bob's
			if err != nil || len(rows) != 2 {
				t.Fatalf("budgets = %+v, %v; want ann's and bob's", rows, err)
			}
			if rows[0].DailyLimit != wantAnn || rows[0].OwnLimit != nil || rows[1].DailyLimit != wantBob || *rows[1].OwnLimit != 50 {
				t.Errorf("budget rows = %+v, %+v; want limits %d (the default) and %d (bob's own)", rows[0], rows[1], wantAnn, wantBob)
			}
			us, err := s.ListUsers(f.ctx, 0, 2)
			if err != nil || len(us) != 2 || us[0].DailyLimit != wantAnn || us[1].DailyLimit != wantBob {
				t.Errorf("users = %+v, %v; want limits %d and %d", us, err, wantAnn, wantBob)
			}
		}
		limits(f.store, 5, 50)
		if created, _, err := f.store.CreateUser(f.ctx, "cy", models.RoleAuthor); err != nil || created.DailyLimit != 5 {
			t.Errorf("a new user's limit = %d (%v), want the default 5", created.DailyLimit, err)
		}
		if _, ok, _ := f.store.Charge(f.ctx, ann, 6, now); ok {
			t.Error("ann charged 6 against the default of 5")
		}
		if spent, ok, _ := f.store.Charge(f.ctx, ann, 5, now); !ok || spent != 5 {
			t.Errorf("ann's charge to the default = %d, %v; want 5, ok", spent, ok)
		}
		if _, ok, _ := f.store.Charge(f.ctx, bob, 20, now); !ok {
			t.Error("bob's charge of 20 refused though his own limit is 50")
		}

		// The same database under a store with another default.
		other := owedtest.Store(t, db, f.clk, owedtest.DailyLimit(8))
		limits(other, 8, 50)
		if spent, ok, _ := other.Charge(f.ctx, ann, 3, now); !ok || spent != 8 {
			t.Errorf("ann's charge under the new default = %d, %v; want 8, ok", spent, ok)
		}
		if _, ok, _ := other.Charge(f.ctx, ann, 1, now); ok {
			t.Error("ann charged past the new default of 8")
		}
		// A retry of ann's budget job is judged against the same limit.
		f.Exec(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, 'p', ?)`, ann, f.NowMs())
		f.Exec(`UPDATE content_jobs SET why = 'budget', due_at = ? WHERE user_id = ?`, models.BudgetReset(now).UnixMilli(), ann)
		if n, err := other.RetryJobs(f.ctx, models.JobFilter{UserID: ann}); err != nil || n != 0 {
			t.Errorf("retried %d (%v) of ann's jobs with her budget spent, want 0", n, err)
		}
		if n, err := owedtest.Store(t, db, f.clk, owedtest.DailyLimit(9)).RetryJobs(f.ctx, models.JobFilter{UserID: ann}); err != nil || n != 1 {
			t.Errorf("retried %d (%v) of ann's jobs with room under a default of 9, want 1", n, err)
		}

		// Nothing set: DefaultDailyLimit.
		limits(owedtest.Store(t, db, f.clk), models.DefaultDailyLimit, 50)
	})
}

// A charge made inside a transaction (its store has no batcher) is written in it: it commits
// with the transaction, and is undone with it.
func TestChargeInsideATransaction(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		ann := f.User("ann")
		undo := errors.New("undo")
		for _, c := range []struct {
			end  error
			want int64
		}{{undo, 0}, {nil, 3}} {
			err := f.store.WithTx(f.ctx, func(tx *models.Store) error {
				if spent, ok, err := tx.Charge(f.ctx, ann, 3, f.clk.Now()); err != nil || !ok || spent != 3 {
					t.Errorf("charge in a transaction: spent %d, ok %v, err %v", spent, ok, err)
				}
				return c.end
			})
			if !errors.Is(err, c.end) {
				t.Fatalf("transaction: %v, want %v", err, c.end)
			}
			if got := f.Spent(ann); got != c.want {
				t.Errorf("after the transaction ended with %v: spent %d, want %d", c.end, got, c.want)
			}
		}
	})
}
