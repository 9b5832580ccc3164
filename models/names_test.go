package models_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/mattn/go-sqlite3"

	"github.com/owed/owed/migrations"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
)

// TestUserNamesUniqueRegardlessOfCase: a name another user has, in any case, is refused
// (ErrNameTaken), so `author=NAME` names one user; other names are still accepted.
func TestUserNamesUniqueRegardlessOfCase(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		f.User("Gen323572")
		for _, name := range []string{"Gen323572", "gen323572", "GEN323572"} {
			if _, _, err := f.store.CreateUser(f.ctx, name, models.RoleBot); !errors.Is(err, models.ErrNameTaken) {
				t.Errorf("%s: %v, want ErrNameTaken", name, err)
			}
		}
		f.User("gen3235720")
		var n int64
		if err := f.store.RawScan(f.ctx, &n, `SELECT count(*) FROM users WHERE lower(name) = 'gen323572'`); err != nil || n != 1 {
			t.Errorf("users named gen323572 in any case: %d %v, want 1", n, err)
		}
	})
}

// TestMigrationRenamesDuplicateNames: a database from before names were unique, with names that
// differ only in case, is migrated by renaming each later one to NAME-ID (the oldest keeps its
// name), and the start that migrates it says so in the log, once per user renamed.
func TestMigrationRenamesDuplicateNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			var url, driver, dsn string
			if dialect == "sqlite" {
				dsn = t.TempDir() + "/owed.db"
				url, driver = "sqlite:"+dsn, "sqlite3"
			} else {
				base := os.Getenv(owedtest.PostgresEnv)
				if base == "" {
					t.Skip(owedtest.PostgresEnv + " not set")
				}
				url = owedtest.PostgresURL(t, base)
				driver, dsn = "pgx", url
			}
			raw, err := sql.Open(driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			list, err := migrations.List(dialect)
			if err != nil {
				t.Fatal(err)
			}
			mustExec := func(q string) {
				t.Helper()
				if _, err := raw.ExecContext(ctx, q); err != nil {
					t.Fatalf("%.60s: %v", q, err)
				}
			}
			mustExec(`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`)
			for _, m := range list {
				if m.Version >= 17 {
					break
				}
				mustExec(m.SQL)
				mustExec(`INSERT INTO schema_migrations VALUES (` + itoa(m.Version) + `, '` + m.Name + `', 0)`)
			}
			for i, name := range []string{"gen323572", "ann", "Gen323572", "GEN323572", "bo"} {
				mustExec(`INSERT INTO users (name, role, token_hash, created_at) VALUES ('` + name + `', 'author', 'h` + itoa(i) + `', 0)`)
			}
			raw.Close()

			var logs bytes.Buffer
			store, err := models.Open(ctx, models.Options{URL: url, DataDir: t.TempDir(), Clock: clocktest.NewFake(owedtest.Start),
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			users, err := store.ListUsers(ctx, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, u := range users {
				names = append(names, u.Name)
			}
			if got := strings.Join(names, " "); got != "gen323572 ann Gen323572-3 GEN323572-4 bo" {
				t.Errorf("names after the migration: %s", got)
			}
			for _, want := range []string{`userId=3 was=Gen323572 now=Gen323572-3`, `userId=4 was=GEN323572 now=GEN323572-4`} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the log does not say %q:\n%s", want, logs.String())
				}
			}
			if strings.Count(logs.String(), "migration 0017 renamed") != 2 {
				t.Errorf("want two renames logged:\n%s", logs.String())
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
