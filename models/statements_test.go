package models_test

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
)

// Every way a statement runs (exec, scan, and query's hand-read rows) logs a slow statement
// at warn through the store's logger, with its placeholders and never its arguments.
func TestEveryStatementPathLogsSlowStatements(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		configure, logged := logEveryStatement(t)
		store := owedtest.Store(t, url, clocktest.NewFake(owedtest.Start), configure)
		f := &fixture{t: t, ctx: t.Context(), store: store}
		const secret = "an-argument-that-must-not-be-logged"
		for _, step := range []struct {
			name string
			run  func() error
			want string // in the logged statement
		}{
			{"exec", func() error {
				_, err := store.RawExec(f.ctx, `UPDATE users SET name = name WHERE name = ?`, secret)
				return err
			}, "UPDATE users SET name = name"},
			{"scan", func() error {
				var n int64
				return store.RawScan(f.ctx, &n, `SELECT COUNT(*) FROM users WHERE name <> ?`, secret)
			}, "SELECT COUNT(*) FROM users"},
			{"query", func() error {
				_, err := store.PublicSongs(f.ctx, false, nil, 10)
				return err
			}, "FROM songs"},
		} {
			before := len(logged())
			if err := step.run(); err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			out := logged()[before:]
			if !strings.Contains(out, "level=WARN") || !strings.Contains(out, step.want) {
				t.Errorf("%s: the slow statement was not logged at warn; log:\n%s", step.name, out)
			}
			if strings.Contains(out, secret) {
				t.Errorf("%s: an argument was logged:\n%s", step.name, out)
			}
		}

		// query's rows log how many were read; a statement that failed logs at error, with no
		// count of rows.
		u, _, err := store.CreateUser(f.ctx, "ann", models.RoleAuthor)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.CreatePitch(f.ctx, u.ID, "p"); err != nil {
			t.Fatal(err)
		}
		line := func(out, what string) string {
			for l := range strings.Lines(out) {
				if strings.Contains(l, what) {
					return l
				}
			}
			t.Fatalf("no line logs %q:\n%s", what, out)
			return ""
		}
		before := len(logged())
		if _, err := store.JobsByTaskWhy(f.ctx); err != nil {
			t.Fatal(err)
		}
		if l := line(logged()[before:], "FROM job_counts"); !strings.Contains(l, "trace.rows=1\n") {
			t.Errorf("query of one row logged: %s", l)
		}
		if _, err := store.RawExec(f.ctx, `DROP TABLE job_counts`); err != nil {
			t.Fatal(err)
		}
		before = len(logged())
		if _, err := store.JobsByTaskWhy(f.ctx); err == nil {
			t.Fatal("read of a dropped table: no error")
		}
		if l := line(logged()[before:], "FROM job_counts"); !strings.Contains(l, "level=ERROR") || strings.Contains(l, "trace.rows") {
			t.Errorf("failed query logged: %s", l)
		}
	})
}

// A ? binds one value in every statement: a list given for one is refused, not spread over
// the statement (GORM would spread it in exec and scan, and could not in query).
func TestQuestionMarkBindsOneValue(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		ids := []int64{1, 2}
		if _, err := f.store.RawExec(f.ctx, `DELETE FROM users WHERE id IN ?`, ids); err == nil || !strings.Contains(err.Error(), "binds one value") {
			t.Errorf("exec with a list: err = %v, want the one-value rule", err)
		}
		var n int64
		if err := f.store.RawScan(f.ctx, &n, `SELECT COUNT(*) FROM users WHERE id IN ?`, ids); err == nil || !strings.Contains(err.Error(), "binds one value") {
			t.Errorf("scan with a list: err = %v, want the one-value rule", err)
		}
		// A list travels as one JSON parameter.
		a, b := f.User("ann"), f.User("bob")
		f.User("cy")
		if err := f.store.RawScan(f.ctx, &n, `SELECT COUNT(*) FROM users WHERE `+f.store.IDIn("id"), fmt.Sprintf("[%d,%d]", a, b)); err != nil || n != 2 {
			t.Errorf("scan with a JSON list: n = %d, err = %v; want 2", n, err)
		}
	})
}

// "Not found" is said one way: ErrNotFound by errors.Is, naming what was missing, through
// whatever the method wraps around it.
func TestNotFoundIsOneSentinelNamingWhatWasMissing(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		for _, c := range []struct {
			what string
			err  error
		}{
			{"job", func() error { _, err := f.store.JobByID(f.ctx, 999); return err }()},
			{"song", func() error { _, err := f.store.SongByID(f.ctx, 999); return err }()},
			{"user", func() error { _, err := f.store.UserByID(f.ctx, 999); return err }()},
			{"webhook", f.store.DeleteWebhook(f.ctx, 999)},
			{"scrape", func() error { _, err := f.store.ScrapeByID(f.ctx, 999); return err }()},
		} {
			if !errors.Is(c.err, models.ErrNotFound) || models.NotFoundWhat(c.err) != c.what {
				t.Errorf("%s: err %v names %q; want ErrNotFound naming %q", c.what, c.err, models.NotFoundWhat(c.err), c.what)
			}
		}
		if w := models.NotFoundWhat(fmt.Errorf("x: %w", models.ErrForbidden)); w != "" {
			t.Errorf("another error names %q", w)
		}
		// The message names the id asked for, and none when the asker gave none (a credential).
		if _, err := f.store.UserByID(f.ctx, 999); err == nil || !strings.HasSuffix(err.Error(), "user 999: not found") {
			t.Errorf("by id: %v", err)
		}
		if _, err := f.store.UserByToken(f.ctx, "owed_nobody"); err == nil || !strings.HasSuffix(err.Error(), ": user: not found") {
			t.Errorf("by token: %v", err)
		}
	})
}

// A store opened without a SlowStatement logs statements slower than DefaultSlowStatement
// (200 ms) at warn. PostgreSQL only: SQLite has no statement that waits.
func TestDefaultSlowStatementIsLogged(t *testing.T) {
	t.Parallel()
	if models.DefaultSlowStatement != 200*time.Millisecond {
		t.Errorf("DefaultSlowStatement = %s, want 200ms", models.DefaultSlowStatement)
	}
	var buf owedtest.LogBuffer
	store := postgresStore(t, func(o *models.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
		o.SlowStatement = 0
	})
	if _, err := store.RawExec(t.Context(), `SELECT pg_sleep(0.25)`); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "pg_sleep") {
		t.Errorf("a 250 ms statement was not logged as slow:\n%s", out)
	}
}

// A row scan fails with the error of the value it could not read, not with the rows' close.
func TestScanReturnsTheErrorOfAValueItCannotRead(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		store := owedtest.Store(t, url, clocktest.NewFake(owedtest.Start))
		var n int64
		if err := store.RawScan(t.Context(), &n, `SELECT 'not a number'`); err == nil {
			t.Errorf("text scanned into an integer: no error (n = %d)", n)
		}
		var one struct {
			N int64 `gorm:"column:n"`
		}
		if err := store.RawScan(t.Context(), &one, `SELECT 'not a number' AS n`); err == nil {
			t.Errorf("text scanned into an integer field: no error (%+v)", one)
		}
	})
}

// Opening a store logs the migrations it applied, and nothing of them when none was pending.
func TestOpenLogsOnlyTheMigrationsItApplied(t *testing.T) {
	t.Parallel()
	owedtest.EmptyDialects(t, func(t *testing.T, url string) {
		for i, want := range []bool{true, false} {
			var buf owedtest.LogBuffer
			s, err := models.Open(t.Context(), models.Options{URL: url, Clock: clocktest.NewFake(owedtest.Start),
				Logger: slog.New(slog.NewTextHandler(&buf, nil))})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			if got := strings.Contains(buf.String(), "migrations applied"); got != want {
				t.Errorf("open %d: logged migrations applied = %v, want %v:\n%s", i+1, got, want, buf.String())
			}
		}
	})
}

// Ping answers while the store is open; Close closes both pools, after which it fails.
func TestPingAndClose(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		s, err := models.Open(t.Context(), models.Options{URL: url, Clock: clocktest.NewFake(owedtest.Start)})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Ping(t.Context()); err != nil {
			t.Fatalf("ping an open store: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Ping(t.Context()); err == nil {
			t.Error("ping after close: no error")
		}
		writer, reader, err := s.RawPools()
		if err != nil {
			t.Fatal(err)
		}
		for name, pool := range map[string]*sql.DB{"writer": writer, "reader": reader} {
			if err := pool.PingContext(t.Context()); err == nil {
				t.Errorf("the %s pool answers after close", name)
			}
		}
	})
}

// PostgreSQL's pool holds at most Options.MaxConns connections, DefaultMaxConns when it is not
// set: never unbounded, which would let a burst open more than the server allows.
func TestPostgresPoolIsCapped(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ set, want int }{{3, 3}, {0, models.DefaultMaxConns}} {
		s := postgresStore(t, func(o *models.Options) { o.MaxConns = c.set })
		writer, _, err := s.RawPools()
		if err != nil {
			t.Fatal(err)
		}
		if got := writer.Stats().MaxOpenConnections; got != c.want {
			t.Errorf("MaxConns %d: the pool opens at most %d connections, want %d", c.set, got, c.want)
		}
	}
}
