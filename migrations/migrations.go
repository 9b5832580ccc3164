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

// dialect is what migrating does differently on each database: where its files are, how its
// statements take parameters, how replicas that start together take turns, and how to ask
// whether a table exists. Every other step is the same on both.
type dialect struct {
	// name is the dialect's folder of migrations ("sqlite" or "postgres").
	name string
	// renumber, insert and exists are the statements migrating runs: move a migration's
	// record to another version (to, from, name); record one (version, name, applied_at);
	// count the schema_migrations tables of the database's current schema.
	renumber, insert, exists string
	// lock and unlock take and give back the lock that keeps replicas from migrating at the
	// same time ("" where the database's one writer already does).
	lock, unlock string
	// renumbered lists migrations that moved to another version after databases had
	// recorded them (see renumber).
	renumbered []renumbering
}

// renumbering is a migration that moved from one version to another.
type renumbering struct {
	name     string
	from, to int
}

// advisoryKey is the PostgreSQL advisory lock owed holds while migrating.
const advisoryKey = 0x6f776564 // "owed"

// dialects are the databases owed migrates, by name.
var dialects = map[string]dialect{
	"sqlite": {
		name:     "sqlite",
		renumber: `UPDATE schema_migrations SET version = ? WHERE version = ? AND name = ?`,
		insert:   `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		exists:   `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`,
		// public_title was version 4 until SQLite gained a twin of PostgreSQL's
		// 0004_claim_room, so that every version names the same step in both dialects.
		renumbered: []renumbering{{name: "public_title", from: 4, to: 5}},
	},
	"postgres": {
		name:     "postgres",
		renumber: `UPDATE schema_migrations SET version = $1 WHERE version = $2 AND name = $3`,
		insert:   `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
		exists:   `SELECT count(*) FROM pg_tables WHERE tablename = 'schema_migrations' AND schemaname = current_schema()`,
		lock:     `SELECT pg_advisory_lock(` + strconv.Itoa(advisoryKey) + `)`,
		unlock:   `SELECT pg_advisory_unlock(` + strconv.Itoa(advisoryKey) + `)`,
	},
}

// dialectNamed is the dialect called name.
func dialectNamed(name string) (dialect, error) {
	d, ok := dialects[name]
	if !ok {
		return dialect{}, fmt.Errorf("migrations: unknown dialect %q", name)
	}
	return d, nil
}

// Migration is one versioned schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// List returns the dialect's migrations in version order.
func List(dialect string) ([]Migration, error) {
	d, err := dialectNamed(dialect)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(files, d.name)
	if err != nil {
		return nil, fmt.Errorf("migrations: %s: %w", d.name, err)
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
		body, err := fs.ReadFile(files, d.name+"/"+name)
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
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

// renumber moves the records of renumbered migrations to their new versions, so that a
// database that applied one under its old version does not apply it again. A migration that
// now takes the old version is then applied as any pending one.
func renumber(ctx context.Context, conn *sql.Conn, d dialect) error {
	for _, r := range d.renumbered {
		if _, err := conn.ExecContext(ctx, d.renumber, r.to, r.from, r.name); err != nil {
			return fmt.Errorf("migrations: renumber %s from %d to %d: %w", r.name, r.from, r.to, err)
		}
	}
	return nil
}

// Apply brings db up to the newest version of the dialect ("sqlite" or "postgres") and
// returns the versions it applied. A failing migration rolls back whole and stops the rest.
func Apply(ctx context.Context, db *sql.DB, dialect string) ([]int, error) {
	d, err := dialectNamed(dialect)
	if err != nil {
		return nil, err
	}
	list, err := List(dialect)
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: connect: %w", err)
	}
	defer conn.Close()
	if d.lock != "" {
		if _, err := conn.ExecContext(ctx, d.lock); err != nil {
			return nil, fmt.Errorf("migrations: lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), d.unlock)
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text    NOT NULL,
		applied_at bigint  NOT NULL)`); err != nil {
		return nil, fmt.Errorf("migrations: version table: %w", err)
	}
	if err := renumber(ctx, conn, d); err != nil {
		return nil, err
	}
	done := map[int]bool{}
	rows, err := conn.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("migrations: applied versions: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("migrations: applied versions: %w", err)
		}
		done[v] = true
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("migrations: applied versions: %w", err)
	}

	if newest := list[len(list)-1].Version; len(done) > 0 {
		for v := range done {
			if v > newest {
				return nil, &NewerSchemaError{Found: maxKey(done), Known: newest}
			}
		}
	}
	var applied []int
	for _, m := range list {
		if done[m.Version] {
			continue
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return applied, fmt.Errorf("migrations: %04d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			tx.Rollback()
			return applied, fmt.Errorf("migrations: %04d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, d.insert, m.Version, m.Name, time.Now().UnixMilli()); err != nil {
			tx.Rollback()
			return applied, fmt.Errorf("migrations: record %04d_%s: %w", m.Version, m.Name, err)
		}
		if err := tx.Commit(); err != nil {
			return applied, fmt.Errorf("migrations: %04d_%s: commit: %w", m.Version, m.Name, err)
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
	d, err := dialectNamed(dialect)
	if err != nil {
		return r, err
	}
	list, err := List(dialect)
	if err != nil {
		return r, err
	}
	var n int
	if err := db.QueryRowContext(ctx, d.exists).Scan(&n); err != nil {
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
