package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// BenchmarkReplicaThroughput measures how screening scales with replicas on one PostgreSQL
// when the model takes 100 ms a call: the owed work is bound by waiting on the model, so each
// replica adds its sweep's concurrency and throughput should grow near-linearly.
//
//	OWED_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	  go test -run '^$' -bench ReplicaThroughput -benchtime 1x ./cmd/owed/
//
// OWED_BENCH_CONCURRENCY sets each replica's sweep concurrency (default 16).
func BenchmarkReplicaThroughput(b *testing.B) {
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		b.Skip("needs PostgreSQL: set " + owedtest.PostgresEnv)
	}
	const perReplica, authors = 2000, 500
	// Each replica's sweep runs this many jobs at once (OWED_SWEEP_CONCURRENCY). At 16 a replica
	// asks the model 160 times a second, so three stay well inside two cores and the figure shows
	// how replicas scale; at 64 three replicas need more CPU than a 2-core machine has.
	concurrency := os.Getenv("OWED_BENCH_CONCURRENCY")
	if concurrency == "" {
		concurrency = "16"
	}
	for _, replicas := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			for range b.N {
				dbURL := owedtest.PostgresURL(b, base)
				model := modeltest.New(b)
				model.Delay(100 * time.Millisecond)
				model.KeepRequests(false)
				env := []string{"OWED_DATABASE_URL=" + dbURL, "OWED_ADMIN_TOKEN=" + owedtest.AdminToken,
					"OWED_MODEL_URL=" + model.URL(), "OWED_DATABASE_MAX_CONNS=16", "OWED_SWEEP_EVERY=1s", "OWED_DAILY_BUDGET=1000000",
					"OWED_SWEEP_CONCURRENCY=" + concurrency}
				var procs []*process
				for range replicas {
					procs = append(procs, startOwed(b, env...))
				}
				db := openDB(b, dbURL)
				// Authors as a community has them: many, each with a few items (one author's
				// budget row would serialise every charge).
				if _, err := db.Exec(`INSERT INTO users (name, role, token_hash)
					SELECT 'author ' || g, 'author', 'bench-' || g FROM generate_series(1, $1) g`, authors); err != nil {
					b.Fatal(err)
				}
				n := perReplica * replicas
				b.ResetTimer()
				start := time.Now()
				// Written straight into the table: the triggers owe the work, and only the sweeps
				// (not inline screens) run it.
				if _, err := db.Exec(`INSERT INTO pitches (user_id, body, created_at)
					SELECT u.id, 'pitch ' || g, 0 FROM generate_series(1, $1) g
					JOIN users u ON u.name = 'author ' || (1 + g % $2)`, n, authors); err != nil {
					b.Fatal(err)
				}
				wait.Within(b, 5*time.Minute, "the screens to settle", func() bool {
					return countRows(b, db, `SELECT COUNT(*) FROM content_jobs`) == 0
				})
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(n)/elapsed.Seconds(), "jobs/s")
				b.ReportMetric(float64(model.Calls()), "calls")
				for _, p := range procs {
					p.cmd.Process.Kill()
					<-p.exited
				}
			}
		})
	}
}
