package models_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
)

func TestFaultOfClassifiesEachDriversErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want models.Fault
	}{
		{&pgconn.PgError{Code: "57P01"}, models.FaultTransient},
		{&pgconn.PgError{Code: "08006"}, models.FaultTransient},
		{&pgconn.PgError{Code: "40001"}, models.FaultTransient},
		{&pgconn.PgError{Code: "40P01"}, models.FaultTransient},
		{&pgconn.PgError{Code: "53300"}, models.FaultTransient},
		{&pgconn.PgError{Code: "53100"}, models.FaultStorage},
		{&pgconn.PgError{Code: "23505"}, models.FaultNone}, // a unique violation is a bug or a conflict
		{&pgconn.PgError{Code: "25006"}, models.FaultNotPrimary},
		{&pgconn.PgError{Code: "XX000", Message: "cannot assign TransactionIds during recovery"}, models.FaultNotPrimary},
		{&pgconn.PgError{Code: "XX000", Message: "something else"}, models.FaultNone},
		{&pgconn.PgError{Code: "55P03"}, models.FaultTimeout},
		{&pgconn.PgError{Code: "57014"}, models.FaultTimeout},
		{fmt.Errorf("create pitch: %w", sqlite3.Error{Code: sqlite3.ErrBusy}), models.FaultTransient},
		{sqlite3.Error{Code: sqlite3.ErrLocked}, models.FaultTransient},
		{sqlite3.Error{Code: sqlite3.ErrFull}, models.FaultStorage},
		{sqlite3.Error{Code: sqlite3.ErrReadonly}, models.FaultStorage},
		{sqlite3.Error{Code: sqlite3.ErrIoErr}, models.FaultStorage},
		{sqlite3.Error{Code: sqlite3.ErrConstraint}, models.FaultNone},
		{models.ErrNotFound, models.FaultNone},
		{context.Canceled, models.FaultNone},
		{errors.New("column 3: string is not an integer"), models.FaultNone},
		{fmt.Errorf("x: %w", models.ErrCommitUnknown), models.FaultTransient},
	} {
		if got := models.FaultOf(c.err); got != c.want {
			t.Errorf("FaultOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A unique index's refusal is told by the driver's error and the index's name, on both
// dialects: the case-folded name's index is told from the token's constraint, and a name
// taken by two writers at once is ErrNameTaken.
func TestUniqueViolationNamesItsIndex(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		insert := `INSERT INTO users (name, role, token_hash, created_at) VALUES (?, 'author', ?, 0)`
		if _, err := f.store.RawExec(f.ctx, insert, "Ann", "h1"); err != nil {
			t.Fatal(err)
		}
		_, byName := f.store.RawExec(f.ctx, insert, "ANN", "h2")
		_, byToken := f.store.RawExec(f.ctx, insert, "bob", "h1")
		if byName == nil || byToken == nil {
			t.Fatalf("inserts that break a unique index: %v, %v; want both refused", byName, byToken)
		}
		if !models.UniqueViolation(byName, "users_name_folded") {
			t.Errorf("the folded name's refusal %v is not told as users_name_folded", byName)
		}
		if models.UniqueViolation(byToken, "users_name_folded") {
			t.Errorf("the token's refusal %v is told as users_name_folded", byToken)
		}
		if models.UniqueViolation(errors.New("UNIQUE constraint failed: index 'users_name_folded'"), "users_name_folded") {
			t.Error("an error that only says the words is told as a refusal")
		}
	})
}

// A transaction that failed on a transient fault before its commit runs again (3 tries in
// all, pausing on the store's RetryClock) and commits once; any other error is not tried again.
func TestWithTxTriesATransientFaultAgain(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		var waits atomic.Int64
		s := owedtest.Store(t, db, clocktest.NewFake(owedtest.Start), func(o *models.Options) {
			o.RetryClock = clocktest.Stepping{Fake: clocktest.NewFake(owedtest.Start), OnWait: func(time.Duration) { waits.Add(1) }}
		})
		ctx := context.Background()
		u, _, err := s.CreateUser(ctx, "ann", models.RoleAuthor)
		if err != nil {
			t.Fatal(err)
		}
		uid := u.ID
		tries := 0
		err = s.WithTx(ctx, func(tx *models.Store) error {
			tries++
			if _, err := tx.RawExec(ctx, `INSERT INTO pitches (user_id, body, created_at) VALUES (?, 'p', 0)`, uid); err != nil {
				return err
			}
			if tries < 3 {
				return &pgconn.PgError{Code: "40001"} // as a serialization failure would
			}
			return nil
		})
		if err != nil || tries != 3 || waits.Load() != 2 {
			t.Fatalf("err %v after %d tries and %d pauses on the clock, want success on the third after two", err, tries, waits.Load())
		}
		var n int
		s.RawScan(ctx, &n, `SELECT COUNT(*) FROM pitches`)
		if n != 1 {
			t.Fatalf("%d pitches after three tries, want 1", n)
		}
		tries = 0
		err = s.WithTx(ctx, func(tx *models.Store) error { tries++; return sqlite3.Error{Code: sqlite3.ErrBusy} })
		if models.FaultOf(err) != models.FaultTransient || tries != models.MaxTxTries {
			t.Fatalf("always busy: %v after %d tries", err, tries)
		}
		tries = 0
		err = s.WithTx(ctx, func(tx *models.Store) error { tries++; return models.ErrNotFound })
		if !errors.Is(err, models.ErrNotFound) || tries != 1 {
			t.Fatalf("not found: %v after %d tries", err, tries)
		}
	})
}

// TestTxRetryPauseDoublesWithJitter: the pause after the first failed try is 25 ms ±50%, after
// the second twice that, so replicas cut off together spread out and back off.
func TestTxRetryPauseDoublesWithJitter(t *testing.T) {
	t.Parallel()
	pauses := map[int][]time.Duration{}
	for range 2000 {
		try := 0
		clk := clocktest.Stepping{Fake: clocktest.NewFake(owedtest.Start), OnWait: func(d time.Duration) { try++; pauses[try] = append(pauses[try], d) }}
		models.TxBackoff.Do(context.Background(), clk, func() (bool, error) { return true, models.ErrCommitUnknown })
	}
	if len(pauses) != models.MaxTxTries-1 {
		t.Fatalf("pauses after %d tries, want after each of the first %d", len(pauses), models.MaxTxTries-1)
	}
	for try, base := range map[int]time.Duration{1: 25 * time.Millisecond, 2: 50 * time.Millisecond} {
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for _, p := range pauses[try] {
			lo, hi = min(lo, p), max(hi, p)
		}
		if lo < base/2 || hi >= base*3/2 {
			t.Errorf("try %d: pauses from %s to %s, want within [%s, %s)", try, lo, hi, base/2, base*3/2)
		}
		// 2,000 draws over the range leave no quarter of it empty.
		if lo > base*3/4 || hi < base*5/4 {
			t.Errorf("try %d: pauses from %s to %s, want them spread over [%s, %s)", try, lo, hi, base/2, base*3/2)
		}
	}
}

// TestStorageProblemIsTheLastWritesFault: a write refused for want of storage sets the reason
// readiness shows (the driver's message, cut to 120 bytes, never the statement); other failed
// writes leave it; the next write that succeeds, or the readiness probe's, clears it.
func TestStorageProblemIsTheLastWritesFault(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		s := owedtest.Store(t, db, clocktest.NewFake(owedtest.Start))
		ctx := context.Background()
		if p := s.StorageProblem(); p != "" {
			t.Errorf("a new store's problem: %q", p)
		}
		ann, _, err := s.CreateUser(ctx, "ann", models.RoleAuthor)
		if err != nil {
			t.Fatal(err)
		}
		full := &pgconn.PgError{Code: "53100", Message: strings.Repeat("no space left on device ", 10)}
		err = s.WithTx(ctx, func(tx *models.Store) error {
			return fmt.Errorf("INSERT INTO pitches VALUES ('secret'): %w", full)
		})
		if models.FaultOf(err) != models.FaultStorage {
			t.Fatalf("err %v, want a storage fault", err)
		}
		want := "the database takes no writes: " + full.Error()[:120]
		if p := s.StorageProblem(); p != want {
			t.Errorf("problem %q, want %q", p, want)
		}
		s.WithTx(ctx, func(tx *models.Store) error { return models.ErrNotFound })
		if p := s.StorageProblem(); p != want {
			t.Errorf("after a write that failed otherwise: %q, want it kept", p)
		}
		limit := int64(5)
		if _, err := s.SetDailyLimit(ctx, ann.ID, &limit); err != nil {
			t.Fatal(err)
		}
		if p := s.StorageProblem(); p != "" {
			t.Errorf("after a write that succeeded: %q, want none", p)
		}

		s.WithTx(ctx, func(tx *models.Store) error { return sqlite3.Error{Code: sqlite3.ErrFull} })
		if p := s.StorageProblem(); p != "the database takes no writes: "+sqlite3.ErrFull.Error() {
			t.Errorf("a short reason: %q", p)
		}
		if err := s.ProbeWrite(ctx); err != nil {
			t.Fatal(err)
		}
		if p := s.StorageProblem(); p != "" {
			t.Errorf("after the probe: %q, want none", p)
		}
		var left int
		s.RawScan(ctx, &left, `SELECT COUNT(*) FROM idempotency_keys`)
		if left != 0 {
			t.Errorf("the probe left %d rows", left)
		}
	})
}

// TestACommitCutOffIsAskedAfterAndTriedAgain: on PostgreSQL, a client's transaction whose
// connection is cut before its COMMIT lands is asked after (txid_status) on a fresh
// connection; found aborted, it runs again and commits once.
func TestACommitCutOffIsAskedAfterAndTriedAgain(t *testing.T) {
	t.Parallel()
	s := postgresStore(t) // SQLite's COMMIT is local and never lost
	ctx := models.WithRequest(context.Background(), &models.Request{})
	u, _, err := s.CreateUser(ctx, "ann", models.RoleAuthor)
	if err != nil {
		t.Fatal(err)
	}
	tries := 0
	err = s.WithTx(ctx, func(tx *models.Store) error {
		tries++
		if _, err := tx.RawExec(ctx, `INSERT INTO pitches (user_id, body, created_at) VALUES (?, 'p', 0)`, u.ID); err != nil {
			return err
		}
		if tries == 1 {
			var pid int64
			if err := tx.RawScan(ctx, &pid, `SELECT pg_backend_pid()`); err != nil {
				return err
			}
			// From another connection, waiting until the transaction's backend has ended.
			var ended bool
			if err := s.RawScan(context.Background(), &ended, `SELECT pg_terminate_backend(CAST(? AS integer), 5000)`, pid); err != nil || !ended {
				t.Errorf("terminate the transaction's backend: %v, %v", ended, err)
			}
		}
		return nil
	})
	if err != nil || tries != 2 {
		t.Fatalf("err %v after %d tries, want success on the second", err, tries)
	}
	var n int
	s.RawScan(context.Background(), &n, `SELECT COUNT(*) FROM pitches`)
	if n != 1 {
		t.Errorf("%d pitches, want the second try's only", n)
	}
}

// TestRequestHookRunsOnceInTheFirstCommit: a request's hook runs inside the first transaction
// that commits, with what it made, and never again for the same request.
func TestRequestHookRunsOnceInTheFirstCommit(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		s := owedtest.Store(t, db, clocktest.NewFake(owedtest.Start))
		if (*models.Request)(nil).HookRan() {
			t.Error("no request: its hook ran")
		}
		runs := 0
		req := &models.Request{Hook: func(ctx context.Context, tx *models.Store, made []any) error {
			runs++
			return nil
		}}
		ctx := models.WithRequest(context.Background(), req)
		u, _, err := s.CreateUser(ctx, "ann", models.RoleAuthor)
		if err != nil {
			t.Fatal(err)
		}
		if req.HookRan() {
			t.Error("the hook ran before any transaction")
		}
		for range 2 {
			if _, err := s.CreatePitch(ctx, u.ID, "p"); err != nil {
				t.Fatal(err)
			}
		}
		if runs != 1 || !req.HookRan() {
			t.Errorf("hook ran %d times (HookRan %v), want once", runs, req.HookRan())
		}
	})
}
