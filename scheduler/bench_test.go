package scheduler_test

import (
	"os"
	"testing"
	"time"

	"github.com/owed/owed/owedtest"
)

// benchJobs is how many pending screen jobs each iteration settles.
const benchJobs = 1000

// BenchmarkScreenSweep measures screening throughput: benchJobs pending screen jobs (pitches,
// so no score follows) settled by one Sweep against an instant fake model over real HTTP, at
// the default concurrency. It runs on SQLite, and on PostgreSQL when OWED_TEST_POSTGRES_URL is
// set. jobs/s counts only the sweeps, not writing the jobs. The -candidate runs have a candidate
// model set: every verdict owes a shadow call, which runs between the sweeps, untimed (shadow
// work waits until no live work is due).
//
//	go test -bench ScreenSweep -run '^$' ./scheduler/
func BenchmarkScreenSweep(b *testing.B) {
	for _, candidate := range []bool{false, true} {
		name := map[bool]string{false: "", true: "-candidate"}[candidate]
		b.Run("sqlite"+name, func(b *testing.B) { benchScreenSweep(b, "sqlite:"+b.TempDir()+"/owed.db", candidate) })
		if base := os.Getenv(owedtest.PostgresEnv); base != "" {
			b.Run("postgres"+name, func(b *testing.B) { benchScreenSweep(b, owedtest.PostgresURL(b, base), candidate) })
		}
	}
}

func benchScreenSweep(b *testing.B, databaseURL string, candidate bool) {
	var r *rig
	if candidate {
		cand := disagreeing(b)
		cand.KeepRequests(false)
		r = shadowRig(b, databaseURL, cand, 1<<40, withDailyLimit(1<<40))
	} else {
		r = newRig(b, databaseURL, withDailyLimit(1<<40))
	}
	r.model.KeepRequests(false)
	user := r.user("bench")
	concurrency := r.content.Config().Concurrency
	var swept time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if _, err := r.content.SweepShadow(r.ctx); err != nil {
			b.Fatal(err)
		}
		r.exec(`WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?)
			INSERT INTO pitches (user_id, body, created_at) SELECT ?, 'a pitch to screen', ? FROM seq`, benchJobs, user, r.nowMs())
		b.StartTimer()
		start := time.Now()
		n, err := r.content.Sweep(r.ctx, 0)
		swept += time.Since(start)
		if err != nil || n != benchJobs {
			b.Fatalf("sweep = %d, %v; want %d", n, err, benchJobs)
		}
	}
	b.StopTimer()
	if left := r.countJobs(); left != 0 {
		b.Fatalf("%d jobs left", left)
	}
	b.ReportMetric(float64(benchJobs*b.N)/swept.Seconds(), "jobs/s")
	b.ReportMetric(float64(concurrency), "concurrency")
	b.ReportMetric(0, "ns/op") // one op is benchJobs jobs: jobs/s is the figure that means something
}
