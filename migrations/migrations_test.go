package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/mattn/go-sqlite3"

	"github.com/owed/owed/migrations"
	"github.com/owed/owed/owedtest"
)

// TestEveryVersionInBothDialects: a version names the same step in both dialects, so "version
// N" means one schema whichever database a replica runs on.
func TestEveryVersionInBothDialects(t *testing.T) {
	lite, err := migrations.List("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	pg, err := migrations.List("postgres")
	if err != nil {
		t.Fatal(err)
	}
	names := func(l []migrations.Migration) []string {
		var out []string
		for _, m := range l {
			out = append(out, fmt.Sprintf("%04d_%s", m.Version, m.Name))
		}
		return out
	}
	if a, b := names(lite), names(pg); !slices.Equal(a, b) {
		t.Errorf("the dialects' migrations differ:\nsqlite   %v\npostgres %v", a, b)
	}
}

// database is a fresh, empty database of the dialect, and a dump of its schema.
type database struct {
	db   *sql.DB
	dump func(t *testing.T) string
}

func fresh(t *testing.T, dialect string) database {
	t.Helper()
	if dialect == "sqlite" {
		db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "owed.db")+"?_foreign_keys=on")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return database{db, func(t *testing.T) string {
			return dumpRows(t, db, `SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master
				WHERE name NOT LIKE 'sqlite_%' AND name <> 'schema_migrations' ORDER BY type, name`)
		}}
	}
	db, err := sql.Open("pgx", owedtest.PostgresURL(t, os.Getenv(owedtest.PostgresEnv)))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // one session, so the URL's search_path is the schema every query sees
	t.Cleanup(func() { db.Close() })
	return database{db, func(t *testing.T) string {
		var schema string
		if err := db.QueryRow(`SELECT current_schema()`).Scan(&schema); err != nil {
			t.Fatal(err)
		}
		// Each test has its own schema; its name is no part of the schema's shape.
		return strings.ReplaceAll(dumpRows(t, db, `SELECT table_name, column_name, ordinal_position::text, data_type, is_nullable, COALESCE(column_default, '')
				FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`)+
			dumpRows(t, db, `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexname`)+
			dumpRows(t, db, `SELECT c.relname, con.conname, pg_get_constraintdef(con.oid) FROM pg_constraint con
				JOIN pg_class c ON c.oid = con.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = current_schema() ORDER BY c.relname, con.conname`)+
			dumpRows(t, db, `SELECT c.relname, tg.tgname, pg_get_triggerdef(tg.oid) FROM pg_trigger tg
				JOIN pg_class c ON c.oid = tg.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = current_schema() AND NOT tg.tgisinternal ORDER BY c.relname, tg.tgname`)+
			dumpRows(t, db, `SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
				WHERE n.nspname = current_schema() ORDER BY p.proname`)+
			dumpRows(t, db, `SELECT c.relname, COALESCE(array_to_string(c.reloptions, ','), '') FROM pg_class c
				JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY c.relname`), schema+".", "")
	}}
}

func dumpRows(t *testing.T, db *sql.DB, q string) string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("dump: %v", err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	for rows.Next() {
		vals := make([]string, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("dump: %v", err)
		}
		b.WriteString(strings.Join(vals, " | ") + "\n")
	}
	return b.String()
}

// applyAs applies migrations by hand and records each under the given version, as an older
// owed would have.
func applyAs(t *testing.T, db *sql.DB, dialect string, steps []migrations.Migration, versions []int) {
	t.Helper()
	if _, err := db.Exec(`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)`
	if dialect == "postgres" {
		insert = `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, 0)`
	}
	for i, m := range steps {
		if _, err := db.Exec(m.SQL); err != nil {
			t.Fatalf("%04d_%s: %v", m.Version, m.Name, err)
		}
		if _, err := db.Exec(insert, versions[i], m.Name); err != nil {
			t.Fatal(err)
		}
	}
}

func recorded(t *testing.T, db *sql.DB) string {
	return dumpRows(t, db, `SELECT version, name FROM schema_migrations ORDER BY version`)
}

// TestUpgradedSchemaEqualsFresh: a database made by an older owed (every earlier version, and
// SQLite's old numbering of public_title) and then upgraded ends with exactly the schema, and
// the record of migrations, of a database made fresh by this one.
func TestUpgradedSchemaEqualsFresh(t *testing.T) {
	ctx := context.Background()
	eachDialect(t, func(t *testing.T, dialect string, list []migrations.Migration) {
		want := fresh(t, dialect)
		if _, err := migrations.Apply(ctx, want.db, dialect); err != nil {
			t.Fatal(err)
		}
		wantSchema, wantRecord := want.dump(t), recorded(t, want.db)
		if !strings.Contains(wantSchema, "content_jobs") {
			t.Fatalf("the fresh schema has no content_jobs:\n%s", wantSchema)
		}
		check := func(t *testing.T, got database) {
			t.Helper()
			applied, err := migrations.Apply(ctx, got.db, dialect)
			if err != nil {
				t.Fatal(err)
			}
			if s := got.dump(t); s != wantSchema {
				t.Errorf("upgraded schema differs from a fresh one (applied %v):\n%s", applied, diff(s, wantSchema))
			}
			if r := recorded(t, got.db); r != wantRecord {
				t.Errorf("recorded migrations:\n%s\nwant\n%s", r, wantRecord)
			}
			if again, err := migrations.Apply(ctx, got.db, dialect); err != nil || len(again) != 0 {
				t.Errorf("a second Apply: %v %v, want nothing to do", again, err)
			}
		}
		for k := 1; k < len(list); k++ {
			t.Run(fmt.Sprintf("from_%04d", list[k-1].Version), func(t *testing.T) {
				old := fresh(t, dialect)
				var versions []int
				for _, m := range list[:k] {
					versions = append(versions, m.Version)
				}
				applyAs(t, old.db, dialect, list[:k], versions)
				check(t, old)
			})
		}
		if dialect == "sqlite" {
			// The first round's SQLite: public_title recorded as version 4, no claim_room.
			t.Run("first_round_numbering", func(t *testing.T) {
				old := fresh(t, dialect)
				var steps []migrations.Migration
				for _, m := range list {
					if m.Version <= 3 || m.Name == "public_title" {
						steps = append(steps, m)
					}
				}
				applyAs(t, old.db, dialect, steps, []int{1, 2, 3, 4})
				check(t, old)
			})
		}
	})
}

// eachDialect runs test as a subtest for SQLite, and for PostgreSQL when a test database is
// configured, with the dialect's migrations.
func eachDialect(t *testing.T, test func(t *testing.T, dialect string, list []migrations.Migration)) {
	dialects := []string{"sqlite"}
	if os.Getenv(owedtest.PostgresEnv) != "" {
		dialects = append(dialects, "postgres")
	}
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			list, err := migrations.List(dialect)
			if err != nil {
				t.Fatal(err)
			}
			test(t, dialect, list)
		})
	}
}

// diff shows the lines of got and want that differ.
func diff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var b strings.Builder
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	return b.String()
}

// TestStatusAndNewerSchema: Status reads an empty database as every migration pending without
// creating anything, a migrated one as every migration applied in order, and a version this
// owed does not know as unknown, which Apply then refuses.
func TestStatusAndNewerSchema(t *testing.T) {
	ctx := context.Background()
	eachDialect(t, func(t *testing.T, dialect string, list []migrations.Migration) {
		db := fresh(t, dialect)
		empty := db.dump(t)
		r, err := migrations.Status(ctx, db.db, dialect)
		if err != nil || len(r.Applied) != 0 || len(r.Pending) != len(list) || len(r.Unknown) != 0 {
			t.Fatalf("empty database: %+v %v, want all %d pending", r, err, len(list))
		}
		if s := db.dump(t); s != empty || recordTable(t, db.db, dialect) {
			t.Fatalf("Status changed an empty database:\n%s", diff(s, empty))
		}

		if _, err := migrations.Apply(ctx, db.db, dialect); err != nil {
			t.Fatal(err)
		}
		r, err = migrations.Status(ctx, db.db, dialect)
		if err != nil || len(r.Pending) != 0 || len(r.Unknown) != 0 || len(r.Applied) != len(list) {
			t.Fatalf("migrated database: %+v %v, want all %d applied", r, err, len(list))
		}
		for i, a := range r.Applied {
			if a.Version != list[i].Version || a.Name != list[i].Name {
				t.Errorf("applied[%d] = %04d_%s, want %04d_%s", i, a.Version, a.Name, list[i].Version, list[i].Name)
			}
		}

		newer := list[len(list)-1].Version + 1
		insert := `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from_the_future', 0)`
		if dialect == "postgres" {
			insert = `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'from_the_future', 0)`
		}
		if _, err := db.db.Exec(insert, newer); err != nil {
			t.Fatal(err)
		}
		r, err = migrations.Status(ctx, db.db, dialect)
		if err != nil || !slices.Equal(r.Unknown, []int{newer}) {
			t.Errorf("status with version %d recorded: %+v %v, want it unknown", newer, r, err)
		}
		var refused *migrations.NewerSchemaError
		if _, err := migrations.Apply(ctx, db.db, dialect); !errors.As(err, &refused) || refused.Found != newer {
			t.Errorf("Apply on a newer schema: %v, want a NewerSchemaError naming %d", err, newer)
		}
	})
	if _, err := migrations.List("oracle"); err == nil {
		t.Error("List of an unknown dialect: no error")
	}
}

// recordTable reports whether the database has a schema_migrations table.
func recordTable(t *testing.T, db *sql.DB, dialect string) bool {
	t.Helper()
	q := `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`
	if dialect == "postgres" {
		q = `SELECT count(*) FROM pg_tables WHERE tablename = 'schema_migrations' AND schemaname = current_schema()`
	}
	var n int
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}
