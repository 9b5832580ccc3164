package models_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
)

// TestIdempotencyKeyLifecycle walks one user's key through every state IdemBegin answers, at
// the edges of its lease and of its time to live: a key exactly ttl old is still kept, and a
// lease ends at its own millisecond.
func TestIdempotencyKeyLifecycle(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann, ben := f.User("ann"), f.User("ben")
		const ttl = 24 * time.Hour
		begin := func(user int64, key, fp string) (models.IdemState, int64, models.IdemAnswer) {
			t.Helper()
			st, lease, a, err := f.store.IdemBegin(f.ctx, user, key, fp, f.clk.Now(), ttl)
			if err != nil {
				t.Fatalf("begin %q: %v", key, err)
			}
			return st, lease, a
		}
		want := func(what string, got, want models.IdemState) {
			t.Helper()
			if got != want {
				t.Errorf("%s: state %d, want %d", what, got, want)
			}
		}

		created := f.clk.Now()
		st, lease, _ := begin(ann, "k", "fp-1")
		want("a new key", st, models.IdemRun)
		if lease != created.Add(models.IdemLease).UnixMilli() || models.IdemLease != 2*time.Minute {
			t.Errorf("lease %d, want now + %s", lease, models.IdemLease)
		}
		st, _, _ = begin(ann, "k", "fp-1")
		want("a repeat while the first runs", st, models.IdemInFlight)
		st, _, _ = begin(ann, "k", "fp-2")
		want("another request under the key", st, models.IdemMismatch)
		st, _, _ = begin(ben, "k", "fp-2")
		want("another user's key of the same name", st, models.IdemRun)

		// The write's transaction keeps a nil answer; finishing with nil keeps what it stored.
		if err := f.store.IdemKeep(f.ctx, ann, "k", lease+1, nil); !errors.Is(err, models.ErrIdemLost) {
			t.Errorf("keep under another lease: %v, want ErrIdemLost", err)
		}
		answer := &models.IdemAnswer{Status: 201, Headers: map[string]string{"Location": "/api/x/1"}, Body: []byte(`{"id":1}`)}
		if err := f.store.IdemKeep(f.ctx, ann, "k", lease, answer); err != nil {
			t.Fatal(err)
		}
		st, _, _ = begin(ann, "k", "fp-1")
		want("a kept answer still held", st, models.IdemInFlight)
		// Its request gone before it finished: from the lease's millisecond the kept answer is
		// replayed.
		f.clk.Set(time.UnixMilli(lease))
		st, _, _ = begin(ann, "k", "fp-1")
		want("a kept answer at the lease's end", st, models.IdemReplay)
		f.clk.Set(created)
		if err := f.store.IdemFinish(f.ctx, ann, "k", lease, nil); err != nil {
			t.Fatal(err)
		}
		st, _, a := begin(ann, "k", "fp-1")
		want("a finished key", st, models.IdemReplay)
		if a.Status != 201 || a.Headers["Location"] != "/api/x/1" || string(a.Body) != `{"id":1}` {
			t.Errorf("replayed %+v, want the kept answer", a)
		}

		// "Older than ttl": at exactly ttl the answer is still kept; a millisecond later the key
		// is forgotten and taken by whatever request comes, with a lease from then.
		f.clk.Set(created.Add(ttl))
		st, _, _ = begin(ann, "k", "fp-1")
		want("a key exactly ttl old", st, models.IdemReplay)
		f.clk.Set(created.Add(ttl + time.Millisecond))
		st, lease2, _ := begin(ann, "k", "fp-3")
		want("a key older than ttl", st, models.IdemRun)
		if lease2 != f.clk.Now().Add(models.IdemLease).UnixMilli() {
			t.Errorf("retaken lease %d, want from now", lease2)
		}

		// A holder that wrote nothing and whose lease ran out is gone: its own repeat runs at the
		// lease's millisecond, not before; another request under the key is still a mismatch.
		f.clk.Set(time.UnixMilli(lease2 - 1))
		st, _, _ = begin(ann, "k", "fp-3")
		want("a repeat a millisecond before the lease ends", st, models.IdemInFlight)
		f.clk.Set(time.UnixMilli(lease2))
		st, _, _ = begin(ann, "k", "fp-4")
		want("another request at an orphan", st, models.IdemMismatch)
		st, lease3, _ := begin(ann, "k", "fp-3")
		want("the repeat at the lease's end", st, models.IdemRun)

		// A commit whose answer was never kept (status 0): repeats are told so.
		if err := f.store.IdemKeep(f.ctx, ann, "k", lease3, nil); err != nil {
			t.Fatal(err)
		}
		if err := f.store.IdemFinish(f.ctx, ann, "k", lease3, nil); err != nil {
			t.Fatal(err)
		}
		st, _, _ = begin(ann, "k", "fp-3")
		want("a write whose answer is not kept", st, models.IdemNotKept)
		// Release forgets only a key whose request wrote nothing.
		if err := f.store.IdemRelease(f.ctx, ann, "k", 0); err != nil {
			t.Fatal(err)
		}
		st, _, _ = begin(ann, "k", "fp-3")
		want("release of a key that committed", st, models.IdemNotKept)

		// A finish with nil over a request that stored nothing does not end its hold; a release does.
		st, lease4, _ := begin(ann, "r", "fp-1")
		want("a second key", st, models.IdemRun)
		if err := f.store.IdemFinish(f.ctx, ann, "r", lease4, nil); err != nil {
			t.Fatal(err)
		}
		st, _, _ = begin(ann, "r", "fp-1")
		want("finish(nil) with nothing stored", st, models.IdemInFlight)
		if err := f.store.IdemRelease(f.ctx, ann, "r", lease4); err != nil {
			t.Fatal(err)
		}
		st, _, _ = begin(ann, "r", "fp-2")
		want("a released key", st, models.IdemRun)
	})
}

// TestIdempotencyKeyWithoutTTL: a ttl of 0 forgets no key, however old.
func TestIdempotencyKeyWithoutTTL(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		_, lease, _, err := f.store.IdemBegin(f.ctx, ann, "k", "fp", f.clk.Now(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.store.IdemFinish(f.ctx, ann, "k", lease, &models.IdemAnswer{Status: 204}); err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(365 * 24 * time.Hour)
		st, _, a, err := f.store.IdemBegin(f.ctx, ann, "k", "fp", f.clk.Now(), 0)
		if err != nil || st != models.IdemReplay || a.Status != 204 {
			t.Errorf("a year on without a ttl: state %d, %+v, %v; want the 204 replayed", st, a, err)
		}
	})
}

// TestIdemSettleTriesAgainOnlyWhileTheDatabaseDoesNotAnswer: transient faults are tried again,
// up to ten times, pausing on the store's RetryClock; any other error ends at once.
func TestIdemSettleTriesAgainOnlyWhileTheDatabaseDoesNotAnswer(t *testing.T) {
	t.Parallel()
	fake := clocktest.NewFake(owedtest.Start)
	s := owedtest.Store(t, "sqlite:"+t.TempDir()+"/owed.db", clocktest.NewFake(owedtest.Start), func(o *models.Options) {
		o.RetryClock = clocktest.Stepping{Fake: fake}
	})
	ctx := context.Background()
	cut := fmt.Errorf("write: %w", models.ErrCommitUnknown)
	calls := 0
	if err := s.IdemSettle(ctx, func() error {
		if calls++; calls < 3 {
			return cut
		}
		return nil
	}); err != nil || calls != 3 {
		t.Errorf("two cuts then success: %v after %d calls, want nil after 3", err, calls)
	}
	calls = 0
	before := fake.Now()
	if err := s.IdemSettle(ctx, func() error { calls++; return cut }); !errors.Is(err, models.ErrCommitUnknown) || calls != 10 {
		t.Errorf("cut every time: %v after %d calls, want the cut after 10", err, calls)
	}
	if waited := fake.Now().Sub(before); waited < time.Second || waited > 2*time.Second {
		t.Errorf("ten tries paused %v on the store's RetryClock, want about a second", waited)
	}
	calls = 0
	bug := errors.New("no such table")
	if err := s.IdemSettle(ctx, func() error { calls++; return bug }); err != bug || calls != 1 {
		t.Errorf("a bug: %v after %d calls, want it after 1", err, calls)
	}
}
