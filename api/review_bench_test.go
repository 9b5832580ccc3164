package api_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// Review queue benchmark sizes: 400 authors with 50 pitches each; half the pitches screened
// (the authors' histories), the other half waiting in the review queue.
const (
	benchReviewAuthors = 400
	benchReviewItems   = 50
)

// BenchmarkReviewQueue measures what a moderator waits for: a page of the review queue (its
// 20 oldest entries with their content and authors' histories, and the counts), a page deep in
// the queue, and a claim, over 10,000 open entries. Seeding takes a few seconds, so it runs only
// with OWED_BENCH_REVIEW=1:
//
//	OWED_BENCH_REVIEW=1 go test ./api -run '^$' -bench ReviewQueue -benchtime 200x
//
// (with OWED_TEST_POSTGRES_URL set, on PostgreSQL too).
func BenchmarkReviewQueue(b *testing.B) {
	if os.Getenv("OWED_BENCH_REVIEW") == "" {
		b.Skip("set OWED_BENCH_REVIEW=1 to seed 10,000 review entries and measure the queue")
	}
	b.Run("sqlite", func(b *testing.B) { benchReview(b, "sqlite:"+b.TempDir()+"/owed.db") })
	if base := os.Getenv(owedtest.PostgresEnv); base != "" {
		b.Run("postgres", func(b *testing.B) { benchReview(b, owedtest.PostgresURL(b, base)) })
	}
}

func benchReview(b *testing.B, db string) {
	env := owedtest.NewEnv(b, db)
	ctx := context.Background()
	store := env.App.Store
	start := time.Now()
	raw := func(q string, args ...any) {
		b.Helper()
		if _, err := store.RawExec(ctx, q, args...); err != nil {
			b.Fatal(err)
		}
	}
	raw(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO users (name, role, token_hash) SELECT 'author' || i, 'author', 'bench-' || i FROM n`, benchReviewAuthors)
	raw(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO pitches (user_id, body, created_at)
		SELECT u.id, 'pitch ' || n.i || ' of ' || u.name || ': a long enough body to read', CAST(? AS BIGINT) + n.i
		FROM users u, n WHERE u.role = 'author'`, benchReviewItems, owedtest.Start.UnixMilli())
	raw(`INSERT INTO screens (kind, item_id, verdict, confidence, screened_at)
		SELECT 'pitch', id, CASE WHEN id % 7 = 0 THEN 'block' ELSE 'allow' END, 0.9, created_at FROM pitches WHERE id % 2 = 0`)
	raw(`UPDATE content_jobs SET why = 'review', due_at = ? WHERE item_id % 2 = 1`, models.ReviewDue.UnixMilli())
	raw(`INSERT INTO reviews (kind, item_id, user_id, reason, entered_at, suggestion, confidence)
		SELECT 'pitch', id, user_id, 'unsure', created_at, 'block', 0.6 FROM pitches WHERE id % 2 = 1`)
	if err := store.Optimize(ctx); err != nil {
		b.Logf("optimize: %v", err)
	}
	q := env.Do(http.MethodGet, "/api/admin/review?limit=20", env.AdminToken, nil)
	var page struct {
		Entries    []struct{ ID int64 }
		NextCursor string
		Counts     struct{ Unsure int64 }
	}
	q.Decode(b, &page)
	if q.Status != http.StatusOK || len(page.Entries) != 20 || page.Counts.Unsure != benchReviewAuthors*benchReviewItems/2 {
		b.Fatalf("queue: %d %s", q.Status, q.Body[:min(len(q.Body), 300)])
	}
	b.Logf("seeded %d pitches, %d in review, in %v; a page is %d bytes", benchReviewAuthors*benchReviewItems,
		page.Counts.Unsure, time.Since(start).Round(time.Millisecond), len(q.Body))
	get := func(b *testing.B, path string) {
		for b.Loop() {
			if r := env.Do(http.MethodGet, path, env.AdminToken, nil); r.Status != http.StatusOK {
				b.Fatalf("%s: %d", path, r.Status)
			}
		}
	}
	b.Run("first page", func(b *testing.B) { get(b, "/api/admin/review?limit=20") })
	b.Run("next page", func(b *testing.B) { get(b, "/api/admin/review?limit=20&cursor="+page.NextCursor) })
	b.Run("one author", func(b *testing.B) { get(b, "/api/admin/review?limit=20&userId=200") })
	b.Run("claim", func(b *testing.B) {
		i := 0
		for b.Loop() {
			id := page.Entries[i%len(page.Entries)].ID
			i++
			if r := env.Do(http.MethodPost, fmt.Sprintf("/api/admin/review/pitch/%d/claim", id), env.AdminToken, nil); r.Status != http.StatusOK {
				b.Fatalf("claim: %d %s", r.Status, r.Body)
			}
		}
	})
}
