// Package migrations holds owed's versioned SQL schema, one folder per dialect, and applies it.
//
// Files are named NNNN_name.sql; each is applied once, in order, inside a transaction, and
// recorded in schema_migrations. On PostgreSQL an advisory lock serialises replicas that start
// together, so exactly one of them applies a pending version.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed sqlite/*.sql postgres/*.sql
var files embed.FS

// Migration is one versioned schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// List returns the dialect's migrations in version order.
func List(dialect string) ([]Migration, error) {
	entries, err := fs.ReadDir(files, dialect)
	if err != nil {
		return nil, fmt.Errorf("migrations: unknown dialect %q", dialect)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migrations: badly named file %s", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migrations: badly numbered file %s", name)
		}
		body, err := fs.ReadFile(files, dialect+"/"+name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(rest, ".sql"), SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations: version %d appears twice", out[i].Version)
		}
	}
	return out, nil
}

// renumbered lists migrations that moved to another version after databases had recorded
// them: SQLite's public_title was version 4 until SQLite gained a twin of PostgreSQL's
// 0004_claim_room, so that every version names the same step in both dialects.
var renumbered = map[string][]struct {
	name     string
	from, to int
}{
	"sqlite": {{name: "public_title", from: 4, to: 5}},
}

// renumber moves the records of renumbered migrations to their new versions, so that a
// database that applied one under its old version does not apply it again. A migration that
// now takes the old version is then applied as any pending one.
func renumber(ctx context.Context, conn *sql.Conn, dialect string) error {
	for _, r := range renumbered[dialect] {
		q := `UPDATE schema_migrations SET version = ? WHERE version = ? AND name = ?`
		if dialect == "postgres" {
			q = `UPDATE schema_migrations SET version = $1 WHERE version = $2 AND name = $3`
		}
		if _, err := conn.ExecContext(ctx, q, r.to, r.from, r.name); err != nil {
			return fmt.Errorf("migrations: renumber %s from %d to %d: %w", r.name, r.from, r.to, err)
		}
	}
	return nil
}

// advisoryKey is the PostgreSQL advisory lock owed holds while migrating.
const advisoryKey = 0x6f776564 // "owed"

// Apply brings db up to the newest version of the dialect ("sqlite" or "postgres") and
// returns the versions it applied. A failing migration rolls back whole and stops the rest.
func Apply(ctx context.Context, db *sql.DB, dialect string) ([]int, error) {
	list, err := List(dialect)
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dialect == "postgres" {
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, advisoryKey); err != nil {
			return nil, fmt.Errorf("migrations: lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, advisoryKey)
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text    NOT NULL,
		applied_at bigint  NOT NULL)`); err != nil {
		return nil, fmt.Errorf("migrations: version table: %w", err)
	}
	if err := renumber(ctx, conn, dialect); err != nil {
		return nil, err
	}
	done := map[int]bool{}
	rows, err := conn.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		done[v] = true
	}
	rows.Close()

	if newest := list[len(list)-1].Version; len(done) > 0 {
		for v := range done {
			if v > newest {
				return nil, &NewerSchemaError{Found: maxKey(done), Known: newest}
			}
		}
	}
	var applied []int
	insert := `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`
	if dialect == "postgres" {
		insert = `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`
	}
	for _, m := range list {
		if done[m.Version] {
			continue
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return applied, err
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			tx.Rollback()
			return applied, fmt.Errorf("migrations: %04d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, insert, m.Version, m.Name, time.Now().UnixMilli()); err != nil {
			tx.Rollback()
			return applied, err
		}
		if err := tx.Commit(); err != nil {
			return applied, err
		}
		applied = append(applied, m.Version)
	}
	return applied, nil
}

// NewerSchemaError is a database migrated by a newer owed than this one: running on it could
// write rows the newer schema forbids, or miss the work its triggers owe, so owed refuses.
type NewerSchemaError struct {
	Found, Known int
}

func (e *NewerSchemaError) Error() string {
	return fmt.Sprintf("migrations: the database's schema is at version %d, newer than this owed knows (%d): "+
		"a newer owed has migrated it; run that version (or newer) here too", e.Found, e.Known)
}

func maxKey(m map[int]bool) int {
	top := 0
	for v := range m {
		top = max(top, v)
	}
	return top
}

// Applied is a migration recorded in the database.
type Applied struct {
	Version   int
	Name      string
	AppliedAt time.Time
}

// Report is the state of a database's schema against the migrations this owed knows.
type Report struct {
	Applied []Applied   // recorded in the database, in version order
	Pending []Migration // known here and not applied yet
	Unknown []int       // applied by a newer owed: this one refuses to run on the database
}

// Status reads which migrations the database has, changing nothing (not even on an empty
// database, where every migration is pending).
func Status(ctx context.Context, db *sql.DB, dialect string) (Report, error) {
	var r Report
	list, err := List(dialect)
	if err != nil {
		return r, err
	}
	exists := `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`
	if dialect == "postgres" {
		exists = `SELECT count(*) FROM pg_tables WHERE tablename = 'schema_migrations' AND schemaname = current_schema()`
	}
	var n int
	if err := db.QueryRowContext(ctx, exists).Scan(&n); err != nil {
		return r, fmt.Errorf("migrations: status: %w", err)
	}
	known := map[int]bool{}
	for _, m := range list {
		known[m.Version] = true
	}
	done := map[int]bool{}
	if n > 0 {
		rows, err := db.QueryContext(ctx, `SELECT version, name, applied_at FROM schema_migrations ORDER BY version`)
		if err != nil {
			return r, fmt.Errorf("migrations: status: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var a Applied
			var at int64
			if err := rows.Scan(&a.Version, &a.Name, &at); err != nil {
				return r, fmt.Errorf("migrations: status: %w", err)
			}
			a.AppliedAt = time.UnixMilli(at).UTC()
			r.Applied = append(r.Applied, a)
			done[a.Version] = true
			if !known[a.Version] {
				r.Unknown = append(r.Unknown, a.Version)
			}
		}
		if err := rows.Err(); err != nil {
			return r, fmt.Errorf("migrations: status: %w", err)
		}
	}
	for _, m := range list {
		if !done[m.Version] {
			r.Pending = append(r.Pending, m)
		}
	}
	return r, nil
}
