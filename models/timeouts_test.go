package models_test

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestStatementsOutsideATransactionTimeOut: on PostgreSQL the lock timeout bounds a statement
// that runs outside a transaction too (a claim, a read, a write of its own): each waiting on
// an outside lock fails with a timeout fault after the lock timeout, not when the lock ends.
func TestStatementsOutsideATransactionTimeOut(t *testing.T) {
	t.Parallel()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("PostgreSQL only: set " + owedtest.PostgresEnv)
	}
	url := owedtest.PostgresURL(t, base)
	const lockTimeout = 300 * time.Millisecond
	s := owedtest.Store(t, url, clock.NewFake(owedtest.Start), func(o *models.Options) { o.LockTimeout = lockTimeout })

	locker, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	tx, err := locker.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`LOCK TABLE content_jobs, model_breaker IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	// Without the timeout each would wait for the lock's end: the deadline makes that a
	// failure of its own kind instead of a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"claim", func() error { _, err := s.ClaimDue(ctx, 10, time.Minute, "owner", 0); return err }},
		{"read", func() error { _, err := s.ReadBreaker(ctx); return err }},
		{"write", func() error {
			_, err := s.RawExec(ctx, `UPDATE model_breaker SET failures = failures WHERE id = 1`)
			return err
		}},
	} {
		began := time.Now()
		err := c.run()
		if took := time.Since(began); models.FaultOf(err) != models.FaultTimeout || took > 5*time.Second {
			t.Errorf("%s under an outside lock: %v (fault %v) after %v; want a timeout fault after about %v",
				c.name, err, models.FaultOf(err), took, lockTimeout)
		}
	}

	// Once the lock is gone the same statements succeed, each committed.
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimDue(ctx, 10, time.Minute, "owner", 0); err != nil {
		t.Errorf("a claim after the lock: %v", err)
	}
	if _, err := s.ReadBreaker(ctx); err != nil {
		t.Errorf("a read after the lock: %v", err)
	}
}
