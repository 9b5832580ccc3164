package models

import (
	"context"
	"testing"

	"github.com/mattn/go-sqlite3"
)

// retryRepeatable tries a repeatable statement again after a transient fault only, up to
// MaxTxTries in all, never inside a transaction (whose retry is WithTx's) and never once the
// caller has gone.
func TestRetryRepeatableTriesOnlyTransientFaultsAgain(t *testing.T) {
	t.Parallel()
	s := openSQLite(t, nil)
	busy := sqlite3.Error{Code: sqlite3.ErrBusy}
	calls := 0
	failing := func(n int, fault error) func() error {
		calls = 0
		return func() error {
			if calls++; calls <= n {
				return fault
			}
			return nil
		}
	}
	if err := s.retryRepeatable(t.Context(), failing(2, busy)); err != nil || calls != 3 {
		t.Errorf("busy twice: %v after %d calls, want success on the third", err, calls)
	}
	if err := s.retryRepeatable(t.Context(), failing(5, busy)); err == nil || calls != MaxTxTries {
		t.Errorf("busy every time: %v after %d calls, want the fault after %d", err, calls, MaxTxTries)
	}
	if err := s.retryRepeatable(t.Context(), failing(5, ErrNotFound)); err != ErrNotFound || calls != 1 {
		t.Errorf("not found: %v after %d calls, want it after 1", err, calls)
	}
	if err := s.retryRepeatable(t.Context(), failing(0, busy)); err != nil || calls != 1 {
		t.Errorf("success: %v after %d calls, want 1", err, calls)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.retryRepeatable(ctx, failing(5, busy)); err == nil || calls != 1 {
		t.Errorf("caller gone: %v after %d calls, want the fault after 1", err, calls)
	}
	err := s.WithTx(t.Context(), func(tx *Store) error {
		if err := tx.retryRepeatable(t.Context(), failing(5, busy)); err == nil || calls != 1 {
			t.Errorf("in a transaction: %v after %d calls, want the fault after 1", err, calls)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
