package models_test

import (
	"context"
	"os"
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
)

// BenchmarkTimeoutsPerTransaction: what setting the lock and statement timeouts at the start
// of each transaction costs a pitch's write on PostgreSQL, as a client's write (the settings
// share the round trip that reads the transaction's id) and as a write of no request (a round
// trip of their own), against the same writes with the timeouts off.
//
//	OWED_TEST_POSTGRES_URL=… go test ./models -run '^$' -bench TimeoutsPerTransaction -benchtime 2000x
func BenchmarkTimeoutsPerTransaction(b *testing.B) {
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		b.Skip("PostgreSQL only: set " + owedtest.PostgresEnv)
	}
	for _, c := range []struct {
		name    string
		timeout int // 0: the defaults, -1: off
		request bool
	}{{"request/on", 0, true}, {"request/off", -1, true}, {"plain/on", 0, false}, {"plain/off", -1, false}} {
		b.Run(c.name, func(b *testing.B) {
			s := owedtest.Store(b, owedtest.PostgresURL(b, base), clocktest.NewFake(owedtest.Start), func(o *models.Options) {
				if c.timeout < 0 {
					o.LockTimeout, o.StatementTimeout = -1, -1
				}
			})
			u, _, err := s.CreateUser(context.Background(), "ann", models.RoleAuthor)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if c.request {
				ctx = models.WithRequest(ctx, &models.Request{})
			}
			b.ResetTimer()
			for range b.N {
				if _, err := s.CreatePitch(ctx, u.ID, "a pitch"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClaimTimeouts: what bounding a claim by the lock and statement timeouts costs on
// PostgreSQL: with them (on), a claim outside a transaction runs in one of its own whose first
// statement sets them (BEGIN, the settings, the claim, COMMIT); without them (off) it is one
// statement that commits by itself. "ten" claims ten due jobs each time (a lease of 0 leaves
// them due), "none" finds nothing due, as an idle runner does.
//
//	OWED_TEST_POSTGRES_URL=… go test ./models -run '^$' -bench ClaimTimeouts -benchtime 3000x -count 3
func BenchmarkClaimTimeouts(b *testing.B) {
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		b.Skip("PostgreSQL only: set " + owedtest.PostgresEnv)
	}
	for _, due := range []int{10, 0} {
		for _, on := range []bool{true, false} {
			name := map[int]string{10: "ten", 0: "none"}[due] + map[bool]string{true: "/on", false: "/off"}[on]
			b.Run(name, func(b *testing.B) {
				s := owedtest.Store(b, owedtest.PostgresURL(b, base), clocktest.NewFake(owedtest.Start), func(o *models.Options) {
					if !on {
						o.LockTimeout, o.StatementTimeout = -1, -1
					}
				})
				ctx := context.Background()
				u, _, err := s.CreateUser(ctx, "ann", models.RoleAuthor)
				if err != nil {
					b.Fatal(err)
				}
				for range due {
					if _, err := s.CreatePitch(ctx, u.ID, "a pitch"); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for range b.N {
					jobs, err := s.ClaimDue(ctx, 10, 0, "bench", 0)
					if err != nil || len(jobs) != due {
						b.Fatalf("claimed %d jobs (%v), want %d", len(jobs), err, due)
					}
				}
			})
		}
	}
}
