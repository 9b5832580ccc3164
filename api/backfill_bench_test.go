package api_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// Benchmark sizes: 2,000 scrapes in 200 chats, 1,000 media rows each.
const (
	benchScrapes       = 2000
	benchChats         = 200
	benchRowsPerScrape = 1000
)

// BenchmarkBackfillStatus measures GET /api/backfill over 2,000 scrapes and 2,000,000 media
// rows (every job started, so the whole status arithmetic runs). Seeding takes a while, so
// it runs only with OWED_BENCH_BACKFILL=1:
//
//	OWED_BENCH_BACKFILL=1 go test ./api -run '^$' -bench BackfillStatus -benchtime 50x
//
// (with OWED_TEST_POSTGRES_URL set, on PostgreSQL too).
func BenchmarkBackfillStatus(b *testing.B) {
	if os.Getenv("OWED_BENCH_BACKFILL") == "" {
		b.Skip("set OWED_BENCH_BACKFILL=1 to seed 2,000,000 media rows and measure GET /api/backfill")
	}
	b.Run("sqlite", func(b *testing.B) { benchStatus(b, "sqlite:"+b.TempDir()+"/owed.db") })
	if base := os.Getenv(owedtest.PostgresEnv); base != "" {
		b.Run("postgres", func(b *testing.B) { benchStatus(b, owedtest.PostgresURL(b, base)) })
	}
}

func benchStatus(b *testing.B, db string) {
	env := owedtest.NewEnv(b, db, func(c *app.Config) { c.WriteRate = 0 })
	ctx := context.Background()
	store := env.App.Store
	start := time.Now()
	seedBackfill(b, store)
	b.Logf("seeded %d scrapes and %d media rows in %v", benchScrapes, benchScrapes*benchRowsPerScrape, time.Since(start).Round(time.Millisecond))
	if err := env.App.Backfill.StartJobs(ctx, ""); err != nil {
		b.Fatal(err)
	}
	r := env.Do(http.MethodGet, "/api/backfill", env.AdminToken, nil)
	var st struct {
		Jobs   []struct{ Pending int64 }
		Totals struct{ Pending, Total int64 }
	}
	r.Decode(b, &st)
	if r.Status != http.StatusOK || len(st.Jobs) != benchChats || st.Totals.Total != benchScrapes*benchRowsPerScrape {
		b.Fatalf("status: %d, %d jobs, %d rows", r.Status, len(st.Jobs), st.Totals.Total)
	}
	b.Logf("the answer holds %d jobs in %d bytes", len(st.Jobs), len(r.Body))
	b.Run("GET", func(b *testing.B) {
		for b.Loop() {
			if r := env.Do(http.MethodGet, "/api/backfill", env.AdminToken, nil); r.Status != http.StatusOK {
				b.Fatalf("status: %d", r.Status)
			}
		}
	})
	// The status alone, without HTTP and JSON.
	b.Run("Status", func(b *testing.B) {
		for b.Loop() {
			if _, err := env.App.Backfill.Status(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// seedBackfill writes the scrapes and media rows in bulk (INSERT … SELECT over a generated
// series), so the counters' triggers run as they would for pushed rows.
func seedBackfill(b *testing.B, store *models.Store) {
	db := store
	series := `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?) SELECT i FROM n`
	if store.Dialect() == models.Postgres {
		series = `SELECT i FROM generate_series(0, ?::bigint) AS n(i)`
	}
	if _, err := db.RawExec(context.Background(), `INSERT INTO scrapes (chat_id, guild_id, backend, mode, state, downloaded, pushed_at, created_at, updated_at)
		SELECT 'chat-' || (i % ?), 'guild', CASE WHEN i % 3 = 0 THEN 'slopbot' ELSE 'puppet' END, 'history',
		CASE i % 3 WHEN 0 THEN 'done' WHEN 1 THEN 'paused' ELSE 'failed' END, i, 0, 0, 0
		FROM (`+series+`) s ORDER BY i`, benchChats, benchScrapes-1); err != nil {
		b.Fatal(err)
	}
	var first int64
	if err := db.RawScan(context.Background(), &first, `SELECT MIN(id) FROM scrapes`); err != nil {
		b.Fatal(err)
	}
	// A scrape at a time keeps each statement's transaction (and PostgreSQL's transition
	// tables) modest.
	for s := range int64(benchScrapes) {
		if _, err := db.RawExec(context.Background(), `INSERT INTO media (scrape_id, kind, url, bytes, state, stored_bytes, updated_at)
			SELECT ?, CASE (i / 6) % 4 WHEN 0 THEN 'image' WHEN 1 THEN 'gif' WHEN 2 THEN 'video' ELSE 'audio' END,
			? || i, 1000 + i,
			CASE i % 6 WHEN 0 THEN 'cached' WHEN 1 THEN 'failed' WHEN 2 THEN 'suspect' WHEN 3 THEN 'unverified' WHEN 4 THEN 'skipped' ELSE 'pending' END,
			CASE WHEN i % 6 = 0 THEN 4000 ELSE 0 END, 0
			FROM (`+series+`) s`, first+s, fmt.Sprintf("https://cdn.example/%d/", first+s), benchRowsPerScrape-1); err != nil {
			b.Fatal(err)
		}
	}
}
