// Command sizing measures how much owed's database grows a day per 1,000 active authors
// (issue 17, docs/operations.md "Sizing"): it starts the real owed on a fresh database with the
// fake model, one webhook subscriber to every event, and N authors who each, in a day, publish
// a song, add a revision, write three comments and send a pitch; it runs the sweep until no job
// is owed, and prints the rows each table gained and the bytes the database grew.
//
//	cd bench && go run ./cmd/sizing -db sqlite -authors 1000
//	cd bench && go run ./cmd/sizing -db postgres -authors 1000
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/mattn/go-sqlite3"

	"github.com/owed/owed/app"
	"github.com/owed/owed/bench/internal/harness"
	"github.com/owed/owed/models"
)

// tables are the ones an author's day writes to.
var tables = []string{"songs", "revisions", "comments", "pitches", "screens", "scores", "content_jobs", "budgets",
	"events", "webhook_deliveries", "webhook_attempts", "sessions"}

func main() {
	var f harness.Flags
	fs := flag.NewFlagSet("sizing", flag.ExitOnError)
	f.Register(fs, 1)
	fs.Parse(os.Args[1:])
	if err := f.Check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := run(&f); err != nil {
		fmt.Fprintln(os.Stderr, "sizing:", err)
		os.Exit(1)
	}
}

func run(f *harness.Flags) error {
	ctx := context.Background()
	dbs, err := harness.NewDatabases(f)
	if err != nil {
		return err
	}
	defer dbs.Close()
	where, err := dbs.Fresh(ctx, "sizing")
	if err != nil {
		return err
	}
	model := harness.StartModel()
	defer model.Close()
	dataDir, err := os.MkdirTemp("", "owedsizing-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dataDir)
	cfg := app.Defaults()
	cfg.DatabaseURL, cfg.DataDir, cfg.ModelURL = harness.OwedURL(f.DB, where), dataDir, model.Fake.URL()
	cfg.AdminToken, cfg.WriteRate = "owed_sizing_admin_0123456789abcdef", 0
	a, err := app.New(ctx, cfg, app.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer a.Shutdown(ctx)
	store := a.Store
	if _, err := store.CreateWebhook(ctx, "https://hooks.example.com/owed", []string{models.EventAll}, "whsec_sizing"); err != nil {
		return err
	}
	authors := make([]int64, f.Authors)
	for i := range authors {
		u, _, err := store.CreateUser(ctx, fmt.Sprintf("author-%05d", i), models.RoleAuthor)
		if err != nil {
			return err
		}
		authors[i] = u.ID
	}
	before, err := measure(ctx, f.DB, where)
	if err != nil {
		return err
	}
	start := time.Now()
	code := `s("bd*2 [~ bd] sd, hh*8").bank("RolandTR909").gain(0.8) // ` + strings.Repeat("a pattern ", 12)
	for i, id := range authors {
		song, _, err := store.CreateSong(ctx, id, fmt.Sprintf("Song of %d", i), code)
		if err != nil {
			return err
		}
		if _, err := store.CreateRevision(ctx, id, song.ID, fmt.Sprintf("Song of %d, take 2", i), code+" take 2"); err != nil {
			return err
		}
		for c := range 3 {
			if _, err := store.CreateComment(ctx, id, song.ID, fmt.Sprintf("comment %d: the hats sit nicely behind the kick", c)); err != nil {
				return err
			}
		}
		if _, err := store.CreatePitch(ctx, id, "A pitch for the weekly show: a slow build from a lone kick into a full 909 pattern."); err != nil {
			return err
		}
		if _, err := store.CreateSession(ctx, id, 30*24*time.Hour); err != nil {
			return err
		}
	}
	for {
		n, err := a.Content.Sweep(ctx, 0)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	after, err := measure(ctx, f.DB, where)
	if err != nil {
		return err
	}
	per := 1000 / float64(f.Authors)
	fmt.Printf("owed sizing: %s, %d active authors' day (song, revision, 3 comments, pitch, a sign-in each; one webhook subscriber to *), %s, %d model calls\n\n",
		f.DB, f.Authors, time.Since(start).Round(time.Millisecond), model.Fake.Calls())
	fmt.Println("| table | rows a day per 1,000 authors |")
	fmt.Println("| --- | ---: |")
	var total int64
	for _, t := range tables {
		d := after.rows[t] - before.rows[t]
		total += d
		if d != 0 {
			fmt.Printf("| %s | %.0f |\n", t, float64(d)*per)
		}
	}
	fmt.Printf("| **all** | **%.0f** |\n\n", float64(total)*per)
	fmt.Printf("database growth: %.1f MiB a day per 1,000 authors (%s)\n", float64(after.bytes-before.bytes)*per/(1<<20), after.how)
	return nil
}

type size struct {
	rows  map[string]int64
	bytes int64
	how   string
}

func measure(ctx context.Context, dialect, where string) (size, error) {
	s := size{rows: map[string]int64{}}
	driver, dsn := "pgx", where
	if dialect == harness.SQLite {
		driver, dsn = "sqlite3", harness.SQLiteDSN(where, false)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return s, err
	}
	defer db.Close()
	for _, t := range tables {
		var n int64
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+t).Scan(&n); err != nil {
			return s, fmt.Errorf("count %s: %w", t, err)
		}
		s.rows[t] = n
	}
	if dialect == harness.SQLite {
		// The WAL folded into the file first, so the file's size is the data's.
		if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			return s, err
		}
		var pages, pageSize, free int64
		db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages)
		db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize)
		db.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free)
		s.bytes, s.how = (pages-free)*pageSize, "SQLite pages in use, after a WAL checkpoint"
		return s, nil
	}
	if _, err := db.ExecContext(ctx, `VACUUM ANALYZE`); err != nil {
		return s, err
	}
	err = db.QueryRowContext(ctx, `SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'`).Scan(&s.bytes)
	s.how = "PostgreSQL tables with their indexes and TOAST, after VACUUM"
	return s, err
}
