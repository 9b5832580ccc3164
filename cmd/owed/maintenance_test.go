package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestHelpAndVersion: --help on every command lists its flags and exits 0; version prints one.
func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	cli := cliEnv(t, "")
	for _, args := range [][]string{
		{"serve", "--help"}, {"migrate", "--help"}, {"migrate", "-h"}, {"users", "add", "--help"},
		{"users", "--help"}, {"backup", "--help"}, {"health", "--help"},
	} {
		out, _, err := cli.run(args...)
		if err != nil {
			t.Errorf("%v: %v, want exit 0", args, err)
		}
		if !strings.Contains(out, "-model-url") || !strings.Contains(out, "OWED_MODEL_URL") {
			t.Errorf("%v printed %q: want the flags with their variables", args, out)
		}
	}
	if out, _, err := cli.run("migrate", "--help"); err != nil || !strings.Contains(out, "-status") {
		t.Errorf("migrate --help: %v %q, want --status listed", err, out)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, _, err := cli.run(args...)
		if err != nil || !strings.HasPrefix(out, "owed ") || strings.TrimSpace(strings.TrimPrefix(out, "owed ")) == "" {
			t.Errorf("%v: %v %q, want owed and a version", args, err, out)
		}
	}
	// A bad flag value names the flag; a setting given as a flag is used.
	if _, _, err := cli.run("migrate", "--sweep-every=often"); err == nil || !strings.Contains(err.Error(), "sweep-every") {
		t.Errorf("--sweep-every=often: %v", err)
	}
	dir := t.TempDir()
	if _, _, err := cli.run("migrate", "--data", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := models.SchemaStatus(context.Background(), models.Options{DataDir: dir}); err != nil {
		t.Errorf("migrate --data %s made no database there: %v", dir, err)
	}
}

// TestMigrateStatusAndSchemaGuard: `owed migrate --status` lists pending migrations and changes
// nothing; after `owed migrate` every one is applied; a database migrated by a newer owed
// (a version this one does not know) is refused by serve and migrate, with a clear message.
func TestMigrateStatusAndSchemaGuard(t *testing.T) {
	t.Parallel()
	owedtest.EmptyDialects(t, func(t *testing.T, db string) {
		cli := cliEnv(t, db)
		dir := cli.dir
		if db == "" || strings.HasPrefix(db, "sqlite:") {
			// SQLite: a status of a database that does not exist is an error, and makes none.
			if _, _, err := cli.run("migrate", "--status"); err == nil || !strings.Contains(err.Error(), "no database") {
				t.Errorf("status of no database: %v", err)
			}
			if _, err := models.SchemaStatus(context.Background(), models.Options{URL: db, DataDir: dir}); err == nil {
				t.Fatal("migrate --status made a database")
			}
		} else {
			out, _, err := cli.run("migrate", "--status")
			if err != nil || !strings.Contains(out, "pending") || strings.Contains(out, "applied") {
				t.Fatalf("status of an empty schema: %v %q, want every migration pending", err, out)
			}
			out, _, _ = cli.run("migrate", "--status")
			if !strings.Contains(out, "0001") || strings.Contains(out, "applied") {
				t.Errorf("a second status %q: the first changed the schema", out)
			}
		}
		if _, _, err := cli.run("migrate"); err != nil {
			t.Fatal(err)
		}
		out, _, err := cli.run("migrate", "--status")
		if err != nil || !strings.Contains(out, "up to date") || strings.Contains(out, "pending") || !strings.Contains(out, "0001") {
			t.Fatalf("status after migrate: %v %q", err, out)
		}
		// A newer owed's migration.
		raw := rawDB(t, db, dir)
		insert := `INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'from_the_future', 0)`
		if _, err := raw.Exec(insert); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"migrate"}, {"migrate", "--status"}} {
			if _, _, err := cli.run(args...); err == nil || !strings.Contains(err.Error(), "newer owed") {
				t.Errorf("%v on a newer schema: %v, want a refusal naming a newer owed", args, err)
			}
		}
		if _, err := models.Open(context.Background(), models.Options{URL: db, DataDir: dir}); err == nil ||
			!strings.Contains(err.Error(), "9999") {
			t.Errorf("opening a newer schema: %v, want a refusal naming its version", err)
		}
	})
}

// rawDB opens the test's database outside owed, as another tool would.
func rawDB(t *testing.T, db, dir string) *sql.DB {
	t.Helper()
	driver, dsn := "sqlite3", filepath.Join(dir, "owed.db")
	switch {
	case strings.HasPrefix(db, "postgres"):
		driver, dsn = "pgx", db
	case strings.HasPrefix(db, "sqlite:"):
		dsn = strings.TrimPrefix(db, "sqlite:")
	}
	raw, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}
